// Head colours (views-core.js HEAD_COLOURS, headColour, HEAD_TINT) against the page background, computed here
// from the WCAG 2.1 definitions rather than with views-core.js's own luminance function.
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');

const ASSETS = path.join(__dirname, '..', '..', 'site_src', 'assets');
const views = require(path.join(ASSETS, 'javascripts', 'views-core.js'));

// Material for MkDocs' default (light) scheme sets --md-default-bg-color: #fff and --md-default-fg-color:
// #000000de (black at 87%); the site uses that scheme (mkdocs.yml: palette with no scheme). Standalone pages use
// the fallbacks in views.css, read below.
const MATERIAL_BG = [255, 255, 255];
const MATERIAL_FG = { rgb: [0, 0, 0], alpha: 0xde / 255 };

function channels(hex) {
  assert.match(hex, /^#[0-9a-f]{6}$/i, hex);
  return [1, 3, 5].map((at) => parseInt(hex.slice(at, at + 2), 16));
}

// WCAG 2.1 relative luminance and contrast ratio (https://www.w3.org/TR/WCAG21/#dfn-relative-luminance).
function luminance(rgb) {
  const [r, g, b] = rgb.map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

function contrast(one, other) {
  const [light, dark] = [luminance(one), luminance(other)].sort((a, b) => b - a);
  return (light + 0.05) / (dark + 0.05);
}

// `top` at opacity `alpha` over the opaque `bottom`, as a browser composites it (in sRGB).
function over(top, alpha, bottom) {
  return top.map((c, i) => c * alpha + bottom[i] * (1 - alpha));
}

// CIELAB (D65) of an sRGB colour, for the CIE76 colour difference (Euclidean distance in L*a*b*).
function lab(rgb) {
  const [r, g, b] = rgb.map((c) => {
    const s = c / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  const xyz = [(0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
    (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883];
  const [fx, fy, fz] = xyz.map((t) => (t > 216 / 24389 ? Math.cbrt(t) : (24389 / 27 * t + 16) / 116));
  return [116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)];
}

function deltaE(one, other) {
  const [a, b] = [lab(one), lab(other)];
  return Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
}

// The fallback colours views.css gives --rgv-bg and --rgv-fg where Material's variables are absent.
function cssFallback(name) {
  const css = fs.readFileSync(path.join(ASSETS, 'stylesheets', 'views.css'), 'utf8');
  const found = css.match(new RegExp('--rgv-' + name + ':\\s*var\\([^,]+,\\s*(#[0-9a-f]{6}|#[0-9a-f]{3})\\)', 'i'));
  assert.ok(found, '--rgv-' + name + ' has a hex fallback in views.css');
  const hex = found[1].length === 4 ? '#' + [...found[1].slice(1)].map((c) => c + c).join('') : found[1];
  return channels(hex);
}

const BACKGROUNDS = { material: MATERIAL_BG, standalone: cssFallback('bg') };

test('there are 16 head colours, and headColour gives them for models of up to 16 heads', () => {
  assert.strictEqual(views.HEAD_COLOURS.length, 16);
  for (const heads of [1, 4, 12, 16]) {
    for (let h = 0; h < heads; h++) assert.strictEqual(views.headColour(h, heads), views.HEAD_COLOURS[h]);
  }
});

test('every head colour has at least 3:1 contrast against the page background (WCAG non-text contrast)', () => {
  for (const [name, background] of Object.entries(BACKGROUNDS)) {
    for (const [h, hex] of views.HEAD_COLOURS.entries()) {
      const ratio = contrast(channels(hex), background);
      assert.ok(ratio >= 3, `head ${h} ${hex} on the ${name} background: ${ratio.toFixed(2)}:1`);
    }
  }
  // head 2 was yellow, 1.34:1 on white: the previous-token head of the findings must now be easy to see
  assert.ok(contrast(channels(views.headColour(2, 12)), MATERIAL_BG) >= 4);
});

test('the 16 head colours differ pairwise by a CIE76 distance of at least 30', () => {
  const colours = views.HEAD_COLOURS.map(channels);
  let closest = Infinity;
  for (let i = 0; i < colours.length; i++) {
    for (let j = i + 1; j < colours.length; j++) {
      const distance = deltaE(colours[i], colours[j]);
      closest = Math.min(closest, distance);
      assert.ok(distance >= 30, `heads ${i} and ${j}: ${views.HEAD_COLOURS[i]} ${views.HEAD_COLOURS[j]} ${distance}`);
    }
  }
  assert.ok(closest < 60, 'the check compares real colours'); // 16 colours this far apart do not exist
});

test('weights stay legible on their tinted cells: dark text at 4.5:1 even at weight 1', () => {
  const texts = { material: over(MATERIAL_FG.rgb, MATERIAL_FG.alpha, MATERIAL_BG), standalone: cssFallback('fg') };
  assert.ok(views.HEAD_TINT > 0.2, 'the tint shows the weight');
  for (const [name, background] of Object.entries(BACKGROUNDS)) {
    for (const [h, hex] of views.HEAD_COLOURS.entries()) {
      const cell = over(channels(hex), views.HEAD_TINT, background);
      const ratio = contrast(texts[name], cell);
      assert.ok(ratio >= 4.5, `head ${h} ${hex}, ${name}: text at ${ratio.toFixed(2)}:1`);
    }
  }
});

test('models with more than 16 heads get generated colours, still at 3:1 and all different', () => {
  const colours = Array.from({ length: 40 }, (_, h) => views.headColour(h, 40));
  assert.strictEqual(new Set(colours).size, 40);
  for (const [h, hex] of colours.entries()) {
    const ratio = contrast(channels(hex), MATERIAL_BG);
    assert.ok(ratio >= 3, `head ${h} of 40: ${hex} at ${ratio.toFixed(2)}:1`);
    assert.ok(ratio <= 12, `head ${h} of 40: ${hex} is nearly black`);
  }
  // neighbours, which share the head toggles' row, are clearly apart
  for (let h = 1; h < colours.length; h++) assert.ok(deltaE(channels(colours[h - 1]), channels(colours[h])) > 20, h);
});

// OKLab (Björn Ottosson's published matrices) of an sRGB colour: lightness L and the a, b plane whose angle is
// the hue. Closer to how different two colours look than CIELAB is for blues, where CIE76 overstates differences.
function oklab(rgb) {
  const [r, g, b] = rgb.map((c) => {
    const s = c / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  const l = Math.cbrt(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b);
  const m = Math.cbrt(0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b);
  const s = Math.cbrt(0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b);
  return [0.2104542553 * l + 0.793617785 * m - 0.0040720468 * s, 1.9779984951 * l - 2.428592205 * m + 0.4505937099 * s,
    0.0259040371 * l + 0.7827717662 * m - 0.808675766 * s];
}

test('in a 12-head model, two head colours of nearly the same hue differ clearly in lightness', () => {
  // issue 28: heads 0 and 7 were two mid blues (hue 15 degrees and lightness 0.06 apart) that read as one colour
  const colours = Array.from({ length: 12 }, (_, h) => oklab(channels(views.headColour(h, 12))));
  let alike = 0;
  for (let i = 0; i < 12; i++) {
    for (let j = i + 1; j < 12; j++) {
      const [one, other] = [colours[i], colours[j]];
      const apart = Math.abs(Math.atan2(one[2], one[1]) - Math.atan2(other[2], other[1])) * 180 / Math.PI;
      if (Math.min(apart, 360 - apart) >= 20) continue;
      alike++;
      const lighter = Math.abs(one[0] - other[0]);
      assert.ok(lighter >= 0.12, `heads ${i} and ${j} of 12: same hue, lightness only ${lighter.toFixed(3)} apart`);
    }
  }
  assert.ok(alike > 0, 'the check meets pairs of the same hue'); // 12 colours cannot all differ by 20 degrees of hue
});
