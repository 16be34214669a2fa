// The live line of a site still being built (build-progress.js), which reportgen/findings/formatting.py duration
// and the note in templates/_macros.md.j2 mirror.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const live = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'build-progress.js'));

test('duration rounds as the pages do', () => {
  assert.strictEqual(live.duration(0.2), '1 s');
  assert.strictEqual(live.duration(89.4), '89 s');
  assert.strictEqual(live.duration(400), '7 min');
  assert.strictEqual(live.duration(3900), '1 h 5 min');
});

test('progressText names the experiments done, running with their masks, and waiting, then the time left', () => {
  const state = {
    experiments: [
      { name: 'baseline', label: 'the unmasked model', state: 'done', masks_done: 1, masks: 1 },
      { name: 'single_heads', label: 'single heads', state: 'running', masks_done: 30, masks: 72 },
      { name: 'importance', label: 'head importance and pruning', state: 'waiting', masks_done: 0, masks: 211 },
    ],
    seconds_per_mask: 1.4, seconds_left: 354.2, stages_left: [],
  };
  assert.strictEqual(live.progressText(state), 'Done: the unmasked model. Running: single heads (30 of 72 masks). ' +
    'Not run yet: head importance and pruning. About 6 min left, at the 1.40 s per mask measured so far.');
  state.experiments.forEach((e) => { e.state = 'waiting'; });
  state.seconds_left = null;
  assert.strictEqual(live.progressText(state),
    'Done: none yet. Not run yet: the unmasked model, single heads, head importance and pruning.');
});
