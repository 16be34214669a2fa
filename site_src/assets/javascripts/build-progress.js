/*
 * A site written while its build still runs (the "Still being built" note, templates/_macros.md.j2): the build
 * rewrites build-progress.js beside the pages every few seconds (reportgen/site/build_progress.py), a script
 * that hands the ablation's state to window.reportgenBuildProgress. This loads it again every POLL_MS (as a
 * script: fetch is blocked from file://) and rewrites the note's live line as text. Once the build has finished,
 * the file is gone (the finished site replaced this one): the note says so and asks for a reload.
 */
(function () {
  'use strict';

  var POLL_MS = 3000;

  // "40 s", "3 min", "1 h 5 min": as reportgen/findings/formatting.py duration writes it.
  function duration(seconds) {
    if (seconds < 90) return Math.max(1, Math.round(seconds)) + ' s';
    var minutes = Math.round(seconds / 60);
    return minutes < 60 ? minutes + ' min' : Math.floor(minutes / 60) + ' h ' + (minutes % 60) + ' min';
  }

  // The note's live line from the state the build wrote (report.py BuildProgress, each experiment with its label).
  function progressText(state) {
    var parts = [];
    function named(wanted) {
      return state.experiments.filter(function (e) { return e.state === wanted; });
    }
    var done = named('done').map(function (e) { return e.label; });
    parts.push('Done: ' + (done.length ? done.join(', ') : 'none yet') + '.');
    named('running').forEach(function (e) {
      parts.push('Running: ' + e.label + ' (' + e.masks_done + ' of ' + e.masks + ' masks).');
    });
    var waiting = named('waiting').map(function (e) { return e.label; });
    if (waiting.length) parts.push('Not run yet: ' + waiting.join(', ') + '.');
    if (state.seconds_left !== null && state.seconds_left !== undefined) {
      parts.push('About ' + duration(state.seconds_left) + ' left, at the ' + state.seconds_per_mask.toFixed(2) +
        ' s per mask measured so far.');
    }
    return parts.join(' ');
  }

  function start(note) {
    var live = document.createElement('p');
    live.className = 'rg-building-live';
    live.setAttribute('aria-live', 'polite');
    note.appendChild(live);
    var source = note.getAttribute('data-progress-src');
    var round = 0;
    window.reportgenBuildProgress = function (state) { live.textContent = 'Now: ' + progressText(state); };
    function poll() {
      var script = document.createElement('script');
      script.src = source + '?' + (round += 1);
      script.onload = function () { script.remove(); setTimeout(poll, POLL_MS); };
      script.onerror = function () {
        script.remove();
        live.textContent = 'The build has finished or stopped: reload the page to see the site as it is now.';
      };
      document.head.appendChild(script);
    }
    poll();
  }

  if (typeof document !== 'undefined') {
    var note = document.querySelector('.rg-building[data-progress-src]');
    if (note) start(note);
  }
  if (typeof module !== 'undefined' && module.exports) module.exports = { duration: duration, progressText: progressText };
})();
