/*
 * reportgen attention views: the data files beside a site's page (reportgen/site/view_files.py). A site's views keep
 * what their first view does not draw in script files beside the page, each line one call deliver(pageKey, chunk,
 * base64). They are plain <script src> elements added here: fetch is blocked from file://, scripts are not. A
 * payload's `files` lists them: {key: page key, urls: {file: URL relative to the page}, per: 'layer' where a file
 * holds every head of a layer (chunk l3h5 in file l3, c-l3h5 in c-l3; fileOf), bytes: size of the largest file}.
 * A single file (reportgen/site/standalone.py) has all its data inline and leaves this script out. Needs
 * views-core.js first.
 */
(function (views) {
  'use strict';

  var delivered = {}; // page key -> {chunk: base64}
  var pending = {}; // URL -> callbacks waiting for its script: each file is loaded once, whoever asks

  function deliver(key, chunk, text) {
    if (typeof key !== 'string' || typeof chunk !== 'string' || typeof text !== 'string') return;
    (delivered[key] = delivered[key] || {})[chunk] = text;
  }

  // The data file (its name in `urls`) that holds `chunk`: its layer's with per 'layer', else its own.
  function fileOf(chunk, per) {
    return per === 'layer' ? chunk.replace(/h\d+$/, '') : chunk;
  }

  // The distinct files that hold `chunks`, in their order (the files a request loads).
  function filesOf(chunks, per) {
    var files = [];
    chunks.forEach(function (chunk) {
      var file = fileOf(chunk, per);
      if (files.indexOf(file) < 0) files.push(file);
    });
    return files;
  }

  function DataFiles(spec) {
    this.key = spec.key;
    this.urls = spec.urls;
    this.per = spec.per || null;
    this.bytes = spec.bytes || 0;
  }

  // The chunk's base64 text, or null until its file has run.
  DataFiles.prototype.text = function (chunk) {
    var got = delivered[this.key];
    return got && typeof got[chunk] === 'string' ? got[chunk] : null;
  };

  // The files that still have to load for `chunks`.
  DataFiles.prototype.missingFiles = function (chunks) {
    var self = this;
    return filesOf(chunks.filter(function (chunk) { return self.text(chunk) === null; }), this.per);
  };

  // Loads the files of the chunks not yet here, each once, then calls done(error or null) once.
  DataFiles.prototype.request = function (chunks, done) {
    var self = this;
    var files = this.missingFiles(chunks);
    var left = files.length;
    var failed = null;
    if (!left) return done(null);
    files.forEach(function (file) {
      self.load(file, function (error) {
        failed = failed || error;
        if (--left) return;
        var lost = chunks.filter(function (chunk) { return self.text(chunk) === null; })[0];
        done(failed || (lost ? new Error(self.urls[fileOf(lost, self.per)] + ' held no data for ' + lost) : null));
      });
    });
  };

  DataFiles.prototype.load = function (file, callback) {
    var url = this.urls[file];
    if (!url) return callback(new Error('this page lists no data file for ' + file));
    if (pending[url]) return pending[url].push(callback);
    var waiting = pending[url] = [callback];
    var script = document.createElement('script');
    function finish(error) {
      delete pending[url];
      script.remove();
      waiting.forEach(function (wait) { wait(error); });
    }
    script.onload = function () { finish(null); };
    script.onerror = function () { finish(new Error('The data file ' + url + ' could not be loaded.')); };
    script.src = url;
    document.head.appendChild(script);
  };

  views.deliver = deliver;
  views.DataFiles = DataFiles;
  views.fileOf = fileOf;
  views.filesOf = filesOf;
})(typeof window !== 'undefined' ? window.reportgenViews : require('./views-core.js')); // Node: the same object
