/*
 * reportgen "Your sentence" page (config views.live): a reader types a text (and optionally a second one), the
 * model runs here, in the reader's browser, and the head view, the model view and the weights/contributions
 * switch draw that input with the same widget as an example page (views-widget.js).
 *
 * Written for reportgen (no third-party code). Needs views-core.js and the views' widget scripts (every page
 * loads them), live-tokenizer.js (the WordPiece tokenizer) and live-model.js (the forward pass), in that order.
 *
 * Why script files and a Blob worker: a page opened from file:// may neither fetch a file nor start a worker
 * from one, but it may load <script src> and start a worker from a Blob of code it holds. So the weights come
 * as script files beside the page (live/model.js, live/weights-NNN.js: reportgen/site/live_page.py) that hand
 * their data to reportgenLiveSpec / reportgenLiveChunk, and the worker's code is the source text of
 * live-model.js's one function, reportgenLiveModel, plus workerMain below. The forward pass runs in the worker,
 * so the page stays responsive; where a worker cannot start, it runs on the page instead (slower to answer).
 *
 * What a reader types reaches the page only as text (the widget's rule: textContent, never innerHTML) and goes
 * nowhere else: nothing here sends anything over the network.
 *
 * A long text takes seconds (17 s for 512 tokens on a laptop): the worker reports each layer as it is done, which
 * the progress bar and the status line show, and Stop ends the run by ending the worker, then starts a new one
 * with the same weights (a copy kept for it: the worker's own were handed over, not copied).
 *
 * For tests and readers' own scripts, window.reportgen.live holds the state: `ready` (weights loaded),
 * `error`, `runs` (inputs computed so far), `stops` (runs stopped), `progress` ({done, total} layers of the
 * latest run) and `last`: the last input computed, {text, pair, tokens, ids,
 * segments, truncated, ms, layers, heads, values (Float32Array [layer][head][query][key] flat), norms, and
 * attention: the same as nested arrays [layer][head][query][key], built when first read}.
 */
(function () {
  'use strict';

  var root = document.querySelector('.rg-live[data-rg-live]');
  var views = null; // window.reportgenViews: the views' scripts load after the page's content, where this is
  if (!root) return;
  var folder = root.getAttribute('data-rg-live');
  var chunkCount = Number(root.getAttribute('data-rg-live-chunks'));
  var form = root.querySelector('.rg-live-form');
  var textBox = form.querySelector('[name=text]');
  var pairBox = form.querySelector('[name=pair]');
  var submit = form.querySelector('button[type=submit]');
  var bar = root.querySelector('.rg-live-progress');
  var status = root.querySelector('.rg-live-status');
  var holder = root.querySelector('.rg-live-views');

  var stop = root.querySelector('.rg-live-stop');

  var live = { ready: false, error: null, runs: 0, stops: 0, progress: null, last: null };
  window.reportgen = window.reportgen || {};
  window.reportgen.live = live;

  var spec = null; // live/model.js: {model, tokenizer, bytes, chunks, chunk_bytes, max_tokens}
  var chunks = []; // the text of each weights file, until decoded
  var tokenizer = null;
  var specialIds = {}; // the ids the views mark as special ([CLS], [SEP], ...), as the example pages do
  var engine = null; // {run(ids, segments, done)}: the worker, or the page itself
  var queued = null; // the input asked for while the weights were loading
  var widget = null; // the views of the last input (views-widget.js ViewsWidget)

  window.reportgenLiveSpec = function (value) { spec = value; };
  window.reportgenLiveChunk = function (index, text) { chunks[index] = text; };

  function say(text, isError) {
    status.textContent = text;
    status.classList.toggle('rg-live-error', Boolean(isError));
  }

  function chunkName(index) {
    return 'weights-' + ('00' + index).slice(-3) + '.js';
  }

  // Loads every script file in parallel; done(error or null) once all are in.
  function loadFiles(names, done) {
    var left = names.length;
    var failed = false;
    bar.max = names.length;
    names.forEach(function (name) {
      var script = document.createElement('script');
      script.src = folder + name;
      script.onload = function () {
        if (failed) return;
        left -= 1;
        bar.value = names.length - left;
        say('Loading the model\u2019s weights: ' + (names.length - left) + ' of ' + names.length + ' files\u2026');
        if (!left) done(null);
      };
      script.onerror = function () {
        if (!failed) done(new Error('the file ' + folder + name + ' did not load'));
        failed = true;
      };
      document.head.appendChild(script);
    });
  }

  // All weights files as one byte array; each chunk's text decodes on its own (live_page.py CHUNK_BYTES).
  function joinedBytes() {
    var bytes = new Uint8Array(spec.bytes);
    var textToBytes = window.reportgenLiveModelApi.textToBytes;
    for (var index = 0; index < spec.chunks; index++) {
      var text = chunks[index];
      if (typeof text !== 'string') throw new Error('the weights file ' + chunkName(index) + ' is missing');
      var offset = index * spec.chunk_bytes;
      var count = Math.min(spec.chunk_bytes, spec.bytes - offset);
      if (textToBytes(text, bytes, offset, count) !== count) {
        throw new Error('the weights file ' + chunkName(index) + ' is cut short');
      }
      chunks[index] = null;
    }
    return bytes;
  }

  // The worker's side: receives the weights once, then one input at a time. Runs in the worker's own scope,
  // after reportgenLiveModel(self) put the model's API on it (so it may use no variable of this file).
  function workerMain(scope) {
    var api = scope.reportgenLiveModelApi;
    var model = null;
    scope.onmessage = function (event) {
      var message = event.data;
      try {
        if (message.kind === 'weights') {
          model = api.decodeWeights(message.spec, new Uint8Array(message.buffer));
          scope.postMessage({ kind: 'ready' });
          return;
        }
        var started = scope.performance.now();
        var out = api.forward(model, message.ids, message.segments, function (done, total) {
          scope.postMessage({ kind: 'progress', id: message.id, done: done, total: total });
        });
        scope.postMessage({ kind: 'result', id: message.id, attention: out.attention, norms: out.norms,
          ms: scope.performance.now() - started }, [out.attention.buffer, out.norms.buffer]);
      } catch (err) {
        scope.postMessage({ kind: 'error', id: message.id, message: String(err && err.message || err) });
      }
    };
  }

  // The worker: started from a Blob of code, handed a copy of the weights (`kept` stays here for the next one).
  function workerEngine(bytes, ready, failed) {
    var source = '(' + window.reportgenLiveModel.toString() + ')(self);\n(' + workerMain.toString() + ')(self);\n';
    var url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
    var kept = bytes.slice();
    var worker = null;
    var waiting = {}; // run id -> {done, progress}
    var next = 1;
    function spawn(whenReady) {
      worker = new Worker(url);
      worker.onmessage = function (event) {
        var message = event.data;
        if (message.kind === 'ready') return whenReady();
        var entry = waiting[message.id];
        if (message.kind === 'progress') return entry && entry.progress && entry.progress(message.done, message.total);
        delete waiting[message.id];
        if (message.kind === 'error' && !entry) return failed(new Error(message.message));
        if (entry) entry.done(message.kind === 'error' ? new Error(message.message) : null, message);
      };
      worker.onerror = function (event) {
        event.preventDefault();
        failed(new Error(event.message || 'the model\u2019s worker stopped'));
      };
      var copy = kept.slice();
      worker.postMessage({ kind: 'weights', spec: spec.model, buffer: copy.buffer }, [copy.buffer]);
    }
    spawn(ready);
    return {
      inWorker: true,
      run: function (ids, segments, done, progress) {
        var id = next++;
        waiting[id] = { done: done, progress: progress };
        worker.postMessage({ kind: 'run', id: id, ids: ids, segments: segments });
      },
      // Ends the run under way (its callbacks are never called) and starts a worker anew; `restarted` once ready.
      stop: function (restarted) {
        worker.terminate();
        waiting = {};
        spawn(restarted);
      },
    };
  }

  function pageEngine(bytes, ready) {
    var api = window.reportgenLiveModelApi;
    var model = api.decodeWeights(spec.model, bytes);
    setTimeout(ready, 0);
    return {
      inWorker: false,
      run: function (ids, segments, done) {
        setTimeout(function () { // let the status line paint first
          try {
            var started = performance.now();
            var out = api.forward(model, ids, segments);
            done(null, { attention: out.attention, norms: out.norms, ms: performance.now() - started });
          } catch (err) {
            done(err);
          }
        }, 0);
      },
    };
  }

  function startEngine(bytes) {
    function ready(note) {
      live.ready = true;
      submit.disabled = false;
      bar.hidden = true;
      say((note || 'The model is ready.') + ' Type a text and press \u201cShow attention\u201d.');
      if (queued) {
        var input = queued;
        queued = null;
        compute(input.text, input.pair);
      }
    }
    function failed(error) {
      live.error = error.message;
      say('The model could not run here: ' + error.message, true);
    }
    try {
      engine = workerEngine(bytes, ready, failed);
      stop.addEventListener('click', function () {
        if (stop.hidden) return;
        stop.hidden = true;
        live.ready = false; // a text asked for meanwhile waits for the new worker (queued)
        live.stops++;
        submit.disabled = true;
        say('Stopped; the model is starting again\u2026');
        engine.stop(function () { ready('Stopped.'); });
      });
    } catch (err) { // no worker from a Blob here (an old browser, a stricter policy): the page runs it
      engine = pageEngine(bytes, ready); // `new Worker` threw before the bytes were handed over
    }
  }

  // The input's view: the example pages' widget over the matrices computed here.
  function show(input, result) {
    var dims = { layers: spec.model.layers, heads: spec.model.heads };
    var n = input.ids.length;
    var special = input.ids.map(function (id) { return specialIds[id] ? 1 : 0; });
    var data = {
      tokens: input.tokens, special: special, segments: input.segments,
      attention: new views.MatrixSource(dims.layers, dims.heads, n, n, result.attention),
      contributions: { encoding: 'norms-f32', norms: result.norms },
    };
    holder.textContent = '';
    var view = views.el('div', 'rgv');
    view.setAttribute('data-rgv', 'views');
    view.setAttribute('data-rgv-init', '1'); // started here, not by views-start.js
    view.setAttribute('data-rgv-hash', 'off'); // the address cannot say what was typed
    holder.appendChild(view);
    var before = widget && widget.state;
    widget = new views.ViewsWidget(view, data, false);
    if (before) keepChoices(widget, before);
    live.runs += 1;
    live.last = lastInput(input, result, dims);
  }

  // A reader who switched to the model view, the contributions, a layer, some heads or (for two pairs) a
  // direction keeps them for the next text; pinned tokens and the top-k / minimum, which depend on the text, do not.
  function keepChoices(next, before) {
    var state = next.state;
    state.view = before.view;
    state.mode = next.contrib ? before.mode : 'weights';
    state.layer = before.layer;
    // a long text starts with one head drawn (views.LONG_INPUT); a reader's single head is kept there too
    if (Math.max(next.n, next.m) <= views.LONG_INPUT || before.heads.length === 1) state.heads = before.heads.slice();
    if (next.isPair && before.filter) state.filter = before.filter;
    next.render(false);
  }

  function lastInput(input, result, dims) {
    var n = input.ids.length;
    var last = {
      text: input.text, pair: input.pair, tokens: input.tokens, ids: input.ids, segments: input.segments,
      special: input.ids.map(function (id) { return specialIds[id] ? 1 : 0; }), truncated: input.truncated, ms: result.ms, layers: dims.layers, heads: dims.heads,
      values: result.attention, norms: result.norms,
    };
    var nested = null;
    Object.defineProperty(last, 'attention', {
      enumerable: true,
      get: function () {
        if (nested) return nested;
        nested = [];
        for (var l = 0; l < dims.layers; l++) {
          var heads = [];
          for (var h = 0; h < dims.heads; h++) {
            var rows = [];
            for (var q = 0; q < n; q++) {
              var start = ((l * dims.heads + h) * n + q) * n;
              rows.push(Array.prototype.slice.call(result.attention, start, start + n));
            }
            heads.push(rows);
          }
          nested.push(heads);
        }
        return nested;
      },
    });
    return last;
  }

  function compute(text, pair) {
    var input;
    try {
      input = tokenizer.encode(text, pair || null, spec.max_tokens);
    } catch (err) {
      say(err.message, true);
      return;
    }
    input.text = text;
    input.pair = pair || null;
    submit.disabled = true;
    var running = 'Running the model on ' + input.ids.length + ' tokens';
    say(running + '\u2026');
    live.progress = null;
    stop.hidden = !engine.inWorker; // the page's own run cannot be interrupted
    engine.run(input.ids, input.segments, function (error, result) {
      submit.disabled = false;
      stop.hidden = true;
      bar.hidden = true;
      if (error) {
        live.error = error.message;
        say('The model could not run on this text: ' + error.message, true);
        return;
      }
      show(input, result);
      var note = input.truncated ? ' Your text was truncated to ' + spec.max_tokens +
        ' tokens (the build\u2019s max_length), as the build truncates its examples.' : '';
      say('Showing ' + input.ids.length + ' tokens, computed here in ' + Math.round(result.ms) + ' ms.' + note);
    }, function (done, total) {
      live.progress = { done: done, total: total };
      bar.max = total;
      bar.value = done;
      bar.setAttribute('aria-label', 'Layers computed');
      bar.hidden = false;
      say(running + ': layer ' + done + ' of ' + total + ' done\u2026');
    });
  }

  form.addEventListener('submit', function (event) {
    event.preventDefault();
    var text = textBox.value;
    var pair = pairBox.value.trim() ? pairBox.value : null;
    if (!live.ready) {
      queued = { text: text, pair: pair };
      say('Your text will be shown as soon as the weights are in\u2026');
      return;
    }
    compute(text, pair);
  });

  function start() {
    textBox.value = root.getAttribute('data-rg-live-text') || '';
    pairBox.value = root.getAttribute('data-rg-live-pair') || '';
    var names = ['model.js'];
    for (var index = 0; index < chunkCount; index++) names.push(chunkName(index));
    loadFiles(names, function (error) {
      if (error) {
        live.error = error.message;
        say('The model\u2019s weights could not be loaded: ' + error.message + '.', true);
        return;
      }
      try {
        tokenizer = window.reportgenLiveTokenizer.createTokenizer(spec.tokenizer);
        specialIds = window.reportgenLiveTokenizer.specialIds(spec.tokenizer); // [UNK] is content, as in a build
        say('Preparing the model\u2026');
        startEngine(joinedBytes());
      } catch (err) {
        live.error = err.message;
        say('The model could not be prepared: ' + err.message, true);
        return;
      }
      if (!queued && textBox.value.trim()) queued = { text: textBox.value, pair: pairBox.value.trim() ? pairBox.value : null };
    });
  }

  function whenLoaded() {
    views = window.reportgenViews;
    if (!views) return say('The views\u2019 scripts did not load, so nothing can be shown.', true);
    start();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', whenLoaded);
  else whenLoaded();
})();
