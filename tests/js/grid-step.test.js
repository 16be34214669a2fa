// The head maps' arrow keys (views.gridStep, views-core.js): one Tab stop, the arrows move within the grid.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const views = require(path.join(__dirname, '..', '..', 'site_src', 'assets', 'javascripts', 'views-core.js'));

test('gridStep: the arrows move one cell and stop at the edges', () => {
  assert.deepStrictEqual(views.gridStep(2, 3, 'ArrowRight', 6, 12), [2, 4]);
  assert.deepStrictEqual(views.gridStep(2, 3, 'ArrowLeft', 6, 12), [2, 2]);
  assert.deepStrictEqual(views.gridStep(2, 3, 'ArrowUp', 6, 12), [1, 3]);
  assert.deepStrictEqual(views.gridStep(2, 3, 'ArrowDown', 6, 12), [3, 3]);
  assert.deepStrictEqual(views.gridStep(0, 0, 'ArrowUp', 6, 12), [0, 0]);
  assert.deepStrictEqual(views.gridStep(0, 0, 'ArrowLeft', 6, 12), [0, 0]);
  assert.deepStrictEqual(views.gridStep(5, 11, 'ArrowDown', 6, 12), [5, 11]);
  assert.deepStrictEqual(views.gridStep(5, 11, 'ArrowRight', 6, 12), [5, 11]);
});

test('gridStep: Home and End go to the row ends, PageUp and PageDown to the first and last layer', () => {
  assert.deepStrictEqual(views.gridStep(2, 3, 'Home', 6, 12), [2, 0]);
  assert.deepStrictEqual(views.gridStep(2, 3, 'End', 6, 12), [2, 11]);
  assert.deepStrictEqual(views.gridStep(2, 3, 'PageUp', 6, 12), [0, 3]);
  assert.deepStrictEqual(views.gridStep(2, 3, 'PageDown', 6, 12), [5, 3]);
});

test('gridStep: any other key does not move', () => {
  for (const key of ['Enter', 'Tab', ' ', 'a', 'Escape']) assert.strictEqual(views.gridStep(2, 3, key, 6, 12), null);
});
