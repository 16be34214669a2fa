/*
 * reportgen's head maps (reportgen/site/charts/head_map_svg.py and value_map_svg.py): a line under each map with
 * the numbers of the cell pointed at, focused or tapped, and the map as one Tab stop with the arrow keys inside.
 * A site's pages only (mkdocs.yml, after views-start.js): a `reportgen view` file has no head map.
 */
(function (views) {
  'use strict';

  // A head map's cells (reportgen/site/charts/head_map_svg.py) are links whose numbers are in a <title>:
  // a tooltip for a mouse, nothing for a finger or the keyboard. Here each map gets a line under it that
  // shows the numbers of the cell pointed at, focused or tapped, with a link that opens it (issue 28).
  // A mouse click still opens a cell at once; a tap on a cell not yet shown shows it, a second tap opens it.
  function headMapReadout(svg) {
    var readout = views.el('p', 'rg-head-map-readout');
    var numbers = readout.appendChild(views.el('span', 'rg-head-map-numbers',
      'Point at or tap a cell for its numbers, or Tab to the map and move with the arrow keys.'));
    var open = views.el('a', 'rg-head-map-open');
    open.hidden = true;
    readout.appendChild(document.createTextNode(' '));
    readout.appendChild(open);
    svg.parentNode.insertBefore(readout, svg.nextSibling);
    var shown = null;
    var tap = null; // {cell, wasShown} from the last touch or pen press, for the click that follows it

    function cellOf(event) {
      var node = event.target;
      while (node && node !== svg && node.tagName.toLowerCase() !== 'a') node = node.parentNode;
      return node && node !== svg ? node : null;
    }
    function show(cell) {
      var title = cell.querySelector('title');
      shown = cell;
      var where = places.get(cell); // [layer, head], read from its title once (below)
      if (where) rove(cell);
      numbers.textContent = title ? title.textContent : '';
      open.textContent = where ? 'Open layer ' + where[0] + ', head ' + where[1] : 'Open this head';
      open.href = cell.getAttribute('href');
      open.hidden = false;
      readout.classList.add('rg-head-map-readout-on');
    }
    // One Tab stop for the whole map (a map of 72 heads was 72 stops before the first finding): the shown
    // cell is in the tab order, the others are reached with the arrow keys (views.gridStep). A cell's place is
    // read from its title ("Layer 2, head 5: ..."), which every cell has.
    var cells = svg.querySelectorAll('a');
    var at = {};
    var places = new Map();
    var layers = 0;
    var heads = 0;
    for (var i = 0; i < cells.length; i++) {
      var title = cells[i].querySelector('title');
      var place = title && /^Layer (\d+), head (\d+)/.exec(title.textContent);
      if (!place) continue;
      places.set(cells[i], [+place[1], +place[2]]);
      at[place[1] + ',' + place[2]] = cells[i];
      layers = Math.max(layers, +place[1] + 1);
      heads = Math.max(heads, +place[2] + 1);
      cells[i].setAttribute('tabindex', places.size === 1 ? '0' : '-1');
    }
    function rove(cell) {
      places.forEach(function (_, other) { other.setAttribute('tabindex', other === cell ? '0' : '-1'); });
    }
    svg.addEventListener('keydown', function (event) {
      var cell = cellOf(event);
      var place = cell && places.get(cell);
      if (!place || event.altKey || event.ctrlKey || event.metaKey) return;
      var to = views.gridStep(place[0], place[1], event.key, layers, heads);
      var next = to && at[to[0] + ',' + to[1]];
      if (!next) return;
      event.preventDefault();
      rove(next);
      next.focus();
    });
    svg.addEventListener('mouseover', function (event) {
      var cell = cellOf(event);
      if (cell) show(cell);
    });
    svg.addEventListener('focusin', function (event) {
      var cell = cellOf(event);
      if (cell) show(cell);
    });
    svg.addEventListener('pointerdown', function (event) {
      var cell = cellOf(event);
      tap = cell && event.pointerType !== 'mouse' ? { cell: cell, wasShown: shown === cell } : null;
    });
    svg.addEventListener('click', function (event) {
      var cell = cellOf(event);
      var first = tap && tap.cell === cell && !tap.wasShown;
      tap = null;
      if (!cell || !first) return; // a mouse click, Enter on a focused cell or a second tap: the link opens
      event.preventDefault();
      show(cell);
    });
  }

  function addHeadMapReadouts() {
    var maps = document.querySelectorAll('svg.rg-head-map-svg');
    for (var i = 0; i < maps.length; i++) {
      if (maps[i].getAttribute('data-rg-readout')) continue; // Material's document$ may call us again
      maps[i].setAttribute('data-rg-readout', '1');
      headMapReadout(maps[i]);
    }
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', addHeadMapReadouts);
  else addHeadMapReadouts();
  if (window.document$ && typeof window.document$.subscribe === 'function') {
    window.document$.subscribe(addHeadMapReadouts);
  }
})(window.reportgenViews);
