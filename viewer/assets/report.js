// gpumem view: draws the page from the JSON in #gpumem-data (viewer/page_json.cc). Vanilla JS,
// canvas and DOM only; no network. Every string from the trace is shown with textContent (el()),
// never parsed as HTML.
//
// Test hook (tests/viewer/browser_test.py): window.gpumemView = {ready, drawnMs, data,
// bandPoint(placeIndex, siteIndex), view(placeIndex)}: bandPoint gives the client coordinates of a
// point inside that call site's band on the place's timeline (where the band is thickest), or
// null; view the time range the timeline shows.
(function () {
  'use strict';

  var data = JSON.parse(document.getElementById('gpumem-data').textContent);
  var COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1',
    '#ff9da7', '#9c755f', '#86bcb6', '#a0cbe8', '#ffbe7d'];
  var OTHER = '#cdd3dd';
  var hooks = { ready: false, drawnMs: 0, data: data, bandPoint: bandPoint, view: view };
  window.gpumemView = hooks;
  var charts = [];  // one per place

  // ---- formatting ----
  function fmtBytes(b) {
    if (b === null || b === undefined) return 'n/a';
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    var i = 0, v = b;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    if (i === 0) return b + ' B';
    return v.toFixed(2) + ' ' + units[i];
  }
  function fmtTime(ns) {
    var a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(a >= 1e11 ? 0 : a >= 1e10 ? 1 : 2) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(a >= 1e8 ? 0 : a >= 1e7 ? 1 : 2) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(1) + ' µs';
    return Math.round(ns) + ' ns';
  }
  // A tick label with as many decimals as the tick step needs.
  function fmtTick(ns, step, largest) {
    var unit = largest >= 1e9 ? 1e9 : largest >= 1e6 ? 1e6 : largest >= 1e3 ? 1e3 : 1;
    var name = { 1e9: ' s', 1e6: ' ms', 1e3: ' µs', 1: ' ns' }[unit];
    var decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / unit) + 1e-9)));
    return (ns / unit).toFixed(decimals) + name;
  }
  // A call site's label made short: "function · file.cc:26" for "file.cc:26 in function" (a
  // site's user line) or "function (/path/file.cc:26)", "function · file.py:37" for
  // "/path/file.py:37 in function".
  function shortLabel(label) {
    var user = /^([^ ]+:\d+) in (.+)$/.exec(label);
    if (user) return user[2] + ' · ' + user[1];
    var f = splitFrame(label);
    if (!f.loc) return f.fn;
    var loc = f.loc.slice(f.loc.lastIndexOf('/') + 1);
    return f.fn + ' · ' + loc;
  }
  function fmtCount(n) { return n.toLocaleString('en-US'); }
  function plural(n, one, many) { return fmtCount(n) + ' ' + (n === 1 ? one : many); }
  function pct(part, whole) { return whole > 0 ? (100 * part / whole).toFixed(1) + '%' : ''; }

  // ---- DOM ----
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent, child) { parent.appendChild(child); return child; }

  // "function (file:line)" -> {fn, loc}; "file:line in function" (Python) -> {fn, loc, py}.
  function splitFrame(text) {
    var py = / in [^ ]+$/.test(text) && /\.py(:\d+)? in /.test(text);
    if (py) {
      var at = text.lastIndexOf(' in ');
      return { fn: text.slice(at + 4), loc: text.slice(0, at), py: true };
    }
    if (text.charAt(text.length - 1) === ')') {
      var open = text.lastIndexOf(' (');
      if (open > 0) return { fn: text.slice(0, open), loc: text.slice(open + 2, -1), py: false };
    }
    return { fn: text, loc: '', py: false, lib: /\+0x[0-9a-f]+$/.test(text) || /^0x/.test(text) };
  }
  function frameList(frames) {
    var ol = el('ol', 'frames');
    frames.forEach(function (text) {
      var f = splitFrame(text);
      var li = add(ol, el('li', f.py ? 'py' : f.lib ? 'lib' : ''));
      add(li, el('span', 'fn', f.fn));
      if (f.loc) { li.appendChild(document.createTextNode(' ')); add(li, el('span', 'loc', f.loc)); }
    });
    return ol;
  }

  var tooltip = document.getElementById('tooltip');
  function showTip(x, y, title, lines) {
    tooltip.textContent = '';
    add(tooltip, el('div', 't', title));
    lines.forEach(function (l) { add(tooltip, el('div', 'm', l)); });
    tooltip.hidden = false;
    var w = tooltip.offsetWidth, h = tooltip.offsetHeight;
    var left = x + 14, top = y + 14;
    if (left + w > window.innerWidth - 8) left = x - w - 14;
    if (top + h > window.innerHeight - 8) top = y - h - 14;
    tooltip.style.left = Math.max(4, left) + 'px';
    tooltip.style.top = Math.max(4, top) + 'px';
  }
  function hideTip() { tooltip.hidden = true; }

  // ---- details panel ----
  function Details(parent) {
    this.box = add(parent, el('div', 'details'));
    this.pinned = false;
    this.clear();
  }
  Details.prototype.clear = function () {
    this.box.textContent = '';
    add(this.box, el('div', 'title', 'Call site'));
    add(this.box, el('div', 'empty', 'Hover over the timeline, a flame graph or a table row to see a call site and its stack; click to keep it here.'));
  };
  Details.prototype.show = function (title, meta, frames, held, via) {
    this.box.textContent = '';
    add(this.box, el('div', 'title', title));
    if (via) add(this.box, el('div', 'meta', 'via ' + via));
    meta.forEach(function (m) { add(this.box, el('div', 'meta', m)); }, this);
    if (held) add(this.box, el('div', 'held', 'held by ' + held));
    if (frames && frames.length) add(this.box, frameList(frames));
    else if (frames) add(this.box, el('div', 'empty', '(no stack recorded)'));
  };
  Details.prototype.site = function (siteIndex, meta) {
    var s = data.sites[siteIndex];
    if (!s) { this.show('other call sites', meta, null); return; }
    this.show(s.label, meta, s.frames, s.held_by, s.via);
  };

  // ---- header ----
  function renderHeader(app) {
    var head = add(app, el('div', 'masthead'));
    add(head, el('span', 'brand', 'gpumem'));
    add(head, el('h1', '', 'GPU memory report'));
    add(head, el('span', 'trace-path', data.trace));
    if (data.command.length) {
      add(app, el('div', 'command', data.command.map(function (a) {
        return /^[\w@%+=:,./-]+$/.test(a) ? a : "'" + a.replace(/'/g, "'\\''") + "'";
      }).join(' ')));
    }
    if (data.notice) {
      add(app, el('div', 'notice error', 'This trace is damaged: ' + data.notice +
        '. The page shows what could be read.'));
    } else if (!data.footer) {
      add(app, el('div', 'notice warn', 'The trace does not hold the whole run (' + data.end + '): memory live at the end is what was live when it stopped, not necessarily leaked.'));
    }
    var facts = add(app, el('div', 'facts'));
    function fact(k, v, s, bad) {
      var f = add(facts, el('div', 'fact' + (bad ? ' bad' : '')));
      add(f, el('div', 'k', k)); add(f, el('div', 'v', v)); if (s) add(f, el('div', 's', s));
      return f;
    }
    fact('Host', data.host || '?', 'pid ' + data.pid +
      (data.start_unix_ns ? ' · ' + new Date(data.start_unix_ns / 1e6).toLocaleString() : ''));
    fact('Duration', fmtTime(data.duration_ns), plural(data.memory_events, 'memory event', 'memory events'));
    data.places.forEach(function (p) {
      fact('Peak · ' + shortPlace(p), fmtBytes(p.peak.bytes), 'at ' + fmtTime(p.peak.t) +
        (p.total ? ' · ' + pct(p.peak.bytes, p.total) + ' of ' + fmtBytes(p.total) : ''));
    });
    // Memory an allocator or library keeps (PyTorch's cached segments, cuBLAS workspaces) is told
    // apart from memory the program lost, as gpumem report does.
    var leaked = 0, leakCount = 0, held = 0;
    data.places.forEach(function (p) {
      leaked += p.leaked.bytes; leakCount += p.leaked.count;
      p.leak_sites.forEach(function (r) { if (data.sites[r[0]].held_by) held += r[1]; });
    });
    fact(data.footer ? 'Never freed' : 'Live at the end', fmtBytes(leaked),
      plural(leakCount, 'allocation', 'allocations') +
      (held ? ' · ' + fmtBytes(held) + ' held by allocators and libraries' : ''), leaked > held);
    fact('Kernel launches', fmtCount(data.launches),
      data.iterations.count ? plural(data.iterations.count, 'iteration', 'iterations') : 'no iterations found');
    var fails = 0;
    data.places.forEach(function (p) { fails += p.failure_count; });
    if (fails) fact('Failed allocations', fmtCount(fails), 'out of memory', true);
    if (data.anomalies) fact('Anomalies', data.anomalies, '', true);
    if (data.unrecorded_events) {
      fact('Not recorded', plural(data.unrecorded_events, 'event', 'events'), data.unrecorded, true);
    }
  }
  function shortPlace(p) {
    if (p.place === -2) return 'pinned host';
    return p.place >= 0 ? 'GPU ' + p.place : 'device ?';
  }

  // ---- timeline ----
  function Chart(place, index, section, details) {
    this.p = place; this.index = index; this.details = details;
    var n = place.max.length;
    this.n = n;
    this.tmin = n ? place.start[0] : 0;
    var end = Math.max(place.end, place.peak.t, this.tmin);
    this.tmax = end + Math.max(1, (end - this.tmin) * 0.01);
    this.defaultView();
    var wrap = add(section, el('div', 'chart'));
    this.canvas = add(wrap, el('canvas', 'timeline'));
    this.canvas.setAttribute('role', 'img');
    this.canvas.setAttribute('aria-label', 'memory in use over time, ' + place.name);
    this.lcanvas = add(wrap, el('canvas', 'launches'));
    this.colorOf = {};
    var self = this;
    place.bands.forEach(function (site, b) { self.colorOf[b] = COLORS[b % COLORS.length]; });
    this.bind();
  }
  Chart.prototype.M = { left: 70, right: 14, top: 22, bottom: 24 };
  Chart.prototype.bucketStart = function (i) { return this.p.start[i]; };
  Chart.prototype.bucketEnd = function (i) { return i + 1 < this.n ? this.p.start[i + 1] : this.tmax; };
  // The first bucket that ends after t.
  Chart.prototype.firstAfter = function (t) {
    var lo = 0, hi = this.n;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (this.bucketEnd(mid) <= t) lo = mid + 1; else hi = mid; }
    return lo;
  };
  // Where the program is busy. Buckets hold equal numbers of events, so a long stretch with none
  // (a PyTorch program's import between setting up its model and training) is one long gap
  // between two bucket starts: when the longest gap is more than half of the run and the peak
  // comes after it, the view starts just before the end of the gap; else it is the whole run.
  Chart.prototype.defaultView = function () {
    var p = this.p, from = this.tmin, gap = 0, after = this.tmin;
    for (var i = 1; i < this.n; i++) {
      var g = this.bucketStart(i) - this.bucketStart(i - 1);
      if (g > gap) { gap = g; after = this.bucketStart(i); }
    }
    if (gap > 0.5 * (this.tmax - this.tmin) && p.peak.t >= after) {
      from = Math.max(this.tmin, after - (this.tmax - after) * 0.04);
    }
    this.v0 = from; this.v1 = this.tmax;
  };
  Chart.prototype.x = function (t) {
    return this.M.left + (t - this.v0) / (this.v1 - this.v0) * this.plotW;
  };
  Chart.prototype.tAt = function (x) {
    return this.v0 + (x - this.M.left) / this.plotW * (this.v1 - this.v0);
  };
  Chart.prototype.setup = function (canvas, cssH) {
    var dpr = window.devicePixelRatio || 1;
    var w = canvas.clientWidth || 800;
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(cssH * dpr);
    var ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { ctx: ctx, w: w, h: cssH };
  };
  // Visible buckets merged per pixel column by their highest value (so the peak is never lost).
  Chart.prototype.columns = function () {
    var p = this.p, out = [];
    for (var i = this.firstAfter(this.v0); i < this.n && this.bucketStart(i) <= this.v1; i++) {
      var x0 = Math.max(this.M.left, this.x(this.bucketStart(i)));
      var x1 = Math.min(this.M.left + this.plotW, this.x(this.bucketEnd(i)));
      var c = Math.floor(x0);
      var prev = out.length ? out[out.length - 1] : null;
      if (prev && prev.c === c && x1 - x0 < 1) {
        if (p.max[i] > p.max[prev.i]) prev.i = i;
        prev.x1 = Math.max(prev.x1, x1);
        continue;
      }
      out.push({ c: c, i: i, x0: x0, x1: Math.max(x1, x0 + 1) });
    }
    return out;
  };
  Chart.prototype.draw = function () {
    var p = this.p, M = this.M;
    var s = this.setup(this.canvas, 280), ctx = s.ctx;
    this.plotW = s.w - M.left - M.right;
    this.plotH = s.h - M.top - M.bottom;
    ctx.clearRect(0, 0, s.w, s.h);
    var cols = this.columns();
    this.cols = cols;
    var ymax = 1;
    cols.forEach(function (col) {
      ymax = Math.max(ymax, p.max[col.i]);
      if (p.reserved.length) ymax = Math.max(ymax, p.reserved[col.i]);
    });
    ymax = niceMax(ymax * 1.08);
    this.ymax = ymax;
    var y = this.yOf = function (v) { return M.top + s.h - M.top - M.bottom - v / ymax * (s.h - M.top - M.bottom); };
    // grid and y axis
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.textAlign = 'right';
    byteTicks(ymax).forEach(function (v) {
      var yy = Math.round(y(v)) + 0.5;
      ctx.strokeStyle = '#edf0f5'; ctx.beginPath(); ctx.moveTo(M.left, yy); ctx.lineTo(s.w - M.right, yy); ctx.stroke();
      ctx.fillStyle = '#6b7384'; ctx.fillText(fmtBytes(v), M.left - 8, yy);
    });
    // stacked bands, the largest at the bottom, "other" on top
    var nb = p.band_bytes.length;
    for (var k = 0; k < cols.length; k++) {
      var col = cols[k], base = 0;
      for (var b = 0; b < nb; b++) {
        var v = p.band_bytes[b][col.i];
        if (!v) continue;
        var y0 = y(base), y1 = y(base + v);
        ctx.fillStyle = b < nb - 1 ? this.colorOf[b] : OTHER;
        if (this.highlight !== undefined && this.highlight !== b) ctx.globalAlpha = 0.3;
        ctx.fillRect(col.x0, y1, col.x1 - col.x0 + 0.4, y0 - y1);
        ctx.globalAlpha = 1;
        base += v;
      }
    }
    // reserved: a dashed step line
    if (p.reserved.length) {
      ctx.strokeStyle = '#2d3446'; ctx.lineWidth = 1.5; ctx.setLineDash([5, 3]);
      ctx.beginPath();
      cols.forEach(function (col, k) {
        var yy = y(p.reserved[col.i]);
        if (k === 0) ctx.moveTo(col.x0, yy); else ctx.lineTo(col.x0, yy);
        ctx.lineTo(col.x1, yy);
      });
      ctx.stroke(); ctx.setLineDash([]); ctx.lineWidth = 1;
    }
    var top = M.top, bottom = s.h - M.bottom, self = this;
    function inView(t) { return t >= self.v0 && t <= self.v1; }
    // iterations: ticks along the top
    ctx.strokeStyle = 'rgba(120,130,150,0.55)';
    data.iterations.times.forEach(function (t) {
      if (!inView(t)) return;
      var xx = Math.round(self.x(t)) + 0.5;
      ctx.beginPath(); ctx.moveTo(xx, top - 8); ctx.lineTo(xx, top - 1); ctx.stroke();
    });
    // failed allocations
    p.failures.forEach(function (f) {
      if (!inView(f.t)) return;
      var xx = Math.round(self.x(f.t)) + 0.5;
      ctx.strokeStyle = 'rgba(209,52,59,0.85)'; ctx.beginPath(); ctx.moveTo(xx, top); ctx.lineTo(xx, bottom); ctx.stroke();
      ctx.fillStyle = '#d1343b'; ctx.beginPath(); ctx.arc(xx, top - 4, 3.5, 0, 2 * Math.PI); ctx.fill();
    });
    // the peak
    if (p.peak.bytes > 0 && inView(p.peak.t)) {
      var px = Math.round(this.x(p.peak.t)) + 0.5, py = y(p.peak.bytes);
      ctx.strokeStyle = '#1b2230'; ctx.setLineDash([2, 2]);
      ctx.beginPath(); ctx.moveTo(px, py); ctx.lineTo(px, bottom); ctx.stroke(); ctx.setLineDash([]);
      ctx.fillStyle = '#1b2230';
      ctx.beginPath(); ctx.moveTo(px - 5, py - 9); ctx.lineTo(px + 5, py - 9); ctx.lineTo(px, py - 2); ctx.fill();
      var label = 'peak ' + fmtBytes(p.peak.bytes);
      ctx.font = '600 11.5px system-ui, sans-serif';
      ctx.textAlign = px > s.w - 120 ? 'right' : 'left';
      ctx.textBaseline = 'bottom';
      ctx.fillText(label, px + (ctx.textAlign === 'left' ? 7 : -7), Math.max(top + 4, py - 4));
    }
    // x axis
    ctx.font = '11px system-ui, sans-serif'; ctx.fillStyle = '#6b7384';
    ctx.textAlign = 'center'; ctx.textBaseline = 'top';
    ctx.strokeStyle = '#c9cfda';
    ctx.beginPath(); ctx.moveTo(M.left, bottom + 0.5); ctx.lineTo(s.w - M.right, bottom + 0.5); ctx.stroke();
    var ticks = timeTicks(this.v0, this.v1, Math.max(2, Math.floor(this.plotW / 110)));
    ticks.forEach(function (t) {
      var xx = self.x(t);
      ctx.fillText(fmtTick(t, ticks.length > 1 ? ticks[1] - ticks[0] : self.v1 - self.v0, self.v1), xx, bottom + 5);
      ctx.beginPath(); ctx.moveTo(xx + 0.5, bottom); ctx.lineTo(xx + 0.5, bottom + 4); ctx.stroke();
    });
    this.drawLaunches();
  };
  Chart.prototype.drawLaunches = function () {
    var p = this.p, M = this.M;
    var s = this.setup(this.lcanvas, 54), ctx = s.ctx;
    ctx.clearRect(0, 0, s.w, s.h);
    ctx.font = '11px system-ui, sans-serif'; ctx.fillStyle = '#6b7384';
    ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
    ctx.fillText('launches', M.left - 8, 20);
    // launches per pixel column: each bucket's launches spread evenly over the pixels it spans
    var lmax = 0, sums = new Float64Array(Math.ceil(this.plotW) + 1);
    for (var i = this.firstAfter(this.v0); i < this.n && this.bucketStart(i) <= this.v1; i++) {
      if (!p.launches[i]) continue;
      var x0 = this.x(this.bucketStart(i)) - M.left, x1 = this.x(this.bucketEnd(i)) - M.left;
      var c0 = Math.max(0, Math.floor(x0)), c1 = Math.min(sums.length - 1, Math.max(c0, Math.ceil(x1) - 1));
      var share = p.launches[i] / (c1 - c0 + 1);
      for (var c = c0; c <= c1; c++) sums[c] += share;
    }
    for (var k = 0; k < sums.length; k++) lmax = Math.max(lmax, sums[k]);
    ctx.fillStyle = '#f4f6f9';
    ctx.fillRect(M.left, 2, this.plotW, 38);
    if (lmax === 0) {
      ctx.textAlign = 'left'; ctx.fillStyle = '#8a93a3';
      ctx.fillText(data.launches ? 'no launches on this device in view' : 'no kernel launches recorded', M.left + 8, 21);
      return;
    }
    ctx.fillStyle = '#2f9e8f';
    for (var j = 0; j < sums.length; j++) {
      if (!sums[j]) continue;
      var h = Math.max(1.5, sums[j] / lmax * 36);
      ctx.fillRect(M.left + j, 40 - h, 1, h);
    }
    var perPx = (this.v1 - this.v0) / this.plotW;
    ctx.fillStyle = '#6b7384'; ctx.textAlign = 'right';
    ctx.fillText('highest: ' + fmtCount(Math.round(lmax)) + ' per ' + fmtTime(perPx), M.left + this.plotW, 48);
  };
  // The column and band under (x, y) in canvas CSS pixels.
  Chart.prototype.hit = function (x, y) {
    if (!this.cols) return null;
    var col = null;
    for (var k = 0; k < this.cols.length; k++) {
      var c = this.cols[k];
      if (x >= c.x0 - 0.5 && x < c.x1 + 0.5) { col = c; break; }
    }
    if (!col) return null;
    var p = this.p, base = 0, band = -1;
    for (var b = 0; b < p.band_bytes.length; b++) {
      var v = p.band_bytes[b][col.i];
      if (!v) continue;
      if (y <= this.yOf(base) && y >= this.yOf(base + v)) { band = b; break; }
      base += v;
    }
    return { col: col, band: band };
  };
  Chart.prototype.describe = function (h) {
    var p = this.p, i = h.col.i;
    var t0 = this.bucketStart(i), t1 = this.bucketEnd(i);
    var span = Math.max(t1 - t0, 1);
    var lines = [fmtTick(t0, span, t1) + ' – ' + fmtTick(t1, span, t1) + ' · in use at most ' + fmtBytes(p.max[i]) +
      ', at the end ' + fmtBytes(p.last[i])];
    if (p.reserved.length) lines.push('reserved ' + fmtBytes(p.reserved[i]));
    if (p.launches[i]) lines.push(plural(p.launches[i], 'kernel launch', 'kernel launches'));
    var site = h.band >= 0 && h.band < p.bands.length ? p.bands[h.band] : -1;
    var bytes = h.band >= 0 ? p.band_bytes[h.band][i] : 0;
    var title = h.band < 0 ? 'no memory here' : site >= 0 ? shortLabel(data.sites[site].label) : 'other call sites';
    if (h.band >= 0) lines.unshift(fmtBytes(bytes) + ' held by this call site (' + pct(bytes, p.max[i]) + ')');
    return { title: title, lines: lines, site: site };
  };
  Chart.prototype.bind = function () {
    var self = this, c = this.canvas, drag = null;
    function local(e) { var r = c.getBoundingClientRect(); return { x: e.clientX - r.left, y: e.clientY - r.top }; }
    c.addEventListener('wheel', function (e) {
      e.preventDefault();
      var q = local(e), t = self.tAt(q.x);
      var f = Math.exp(e.deltaY * 0.0015);
      var span = Math.max((self.v1 - self.v0) * f, 1000);
      span = Math.min(span, self.tmax - self.tmin);
      var frac = (t - self.v0) / (self.v1 - self.v0);
      self.setView(t - frac * span, t - frac * span + span);
    }, { passive: false });
    c.addEventListener('mousedown', function (e) {
      drag = { x: e.clientX, v0: self.v0, v1: self.v1, moved: false };
    });
    window.addEventListener('mousemove', function (e) {
      if (!drag) return;
      var dx = e.clientX - drag.x;
      if (Math.abs(dx) > 3) { drag.moved = true; c.classList.add('dragging'); hideTip(); }
      if (!drag.moved) return;
      var dt = -dx / self.plotW * (drag.v1 - drag.v0);
      self.setView(drag.v0 + dt, drag.v1 + dt);
    });
    window.addEventListener('mouseup', function (e) {
      if (!drag) return;
      var moved = drag.moved;
      drag = null; c.classList.remove('dragging');
      if (!moved && e.target === c) {
        var q = local(e), h = self.hit(q.x, q.y);
        if (h && h.band >= 0) {
          var d = self.describe(h);
          self.details.pinned = true;
          self.details.site(d.site, d.lines);
        }
      }
    });
    c.addEventListener('mousemove', function (e) {
      if (drag && drag.moved) return;
      var q = local(e), h = self.hit(q.x, q.y);
      if (!h) { hideTip(); return; }
      var d = self.describe(h);
      showTip(e.clientX, e.clientY, d.title, d.lines);
      if (!self.details.pinned && h.band >= 0) self.details.site(d.site, d.lines);
    });
    c.addEventListener('mouseleave', hideTip);
    c.addEventListener('dblclick', function () { self.defaultView(); self.draw(); });
  };
  Chart.prototype.setView = function (v0, v1) {
    var span = v1 - v0;
    if (v0 < this.tmin) { v0 = this.tmin; v1 = v0 + span; }
    if (v1 > this.tmax) { v1 = this.tmax; v0 = Math.max(this.tmin, v1 - span); }
    this.v0 = v0; this.v1 = v1;
    this.draw();
  };
  // Client coordinates inside band of `siteIndex`, where it is thickest in view.
  Chart.prototype.bandPoint = function (siteIndex) {
    var b = this.p.bands.indexOf(siteIndex);
    if (b < 0 || !this.cols) return null;
    var best = null, bestV = 0, p = this.p;
    for (var k = 0; k < this.cols.length; k++) {
      var col = this.cols[k], v = p.band_bytes[b][col.i];
      if (v > bestV) { bestV = v; best = col; }
    }
    if (!best) return null;
    var base = 0;
    for (var j = 0; j < b; j++) base += p.band_bytes[j][best.i];
    var r = this.canvas.getBoundingClientRect();
    return { x: r.left + (best.x0 + best.x1) / 2, y: r.top + (this.yOf(base) + this.yOf(base + bestV)) / 2 };
  };
  // The time range a place's timeline shows, [from, to] in ns since the start.
  function view(placeIndex) {
    var chart = charts[placeIndex];
    return chart ? [chart.v0, chart.v1] : null;
  }
  function bandPoint(placeIndex, siteIndex) {
    var chart = charts[placeIndex];
    return chart ? chart.bandPoint(siteIndex) : null;
  }

  function niceMax(v) {
    var units = [1, 1024, 1048576, 1073741824, 1099511627776];
    var u = 1;
    units.forEach(function (x) { if (v >= x) u = x; });
    var m = v / u, steps = [1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 32, 40, 50, 64, 80, 100, 128, 160, 200, 256, 320, 400, 512, 640, 800, 1024];
    for (var i = 0; i < steps.length; i++) if (steps[i] >= m) return steps[i] * u;
    return v;
  }
  function byteTicks(max) {
    var out = [];
    for (var k = 0; k <= 4; k++) out.push(max * k / 4);
    return out;
  }
  function timeTicks(t0, t1, count) {
    var span = t1 - t0, raw = span / count;
    var mag = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
    var step = [1, 2, 5, 10].map(function (m) { return m * mag; }).find(function (s) { return s >= raw; }) || 10 * mag;
    var out = [];
    for (var t = Math.ceil(t0 / step) * step; t <= t1 + 1e-6; t += step) out.push(t);
    return out;
  }

  function renderLegend(section, chart) {
    var p = chart.p, legend = add(section, el('div', 'legend'));
    function item(color, cls, text, band) {
      var it = add(legend, el('span', 'item'));
      var sw = add(it, el('span', 'sw' + (cls ? ' ' + cls : '')));
      if (color) sw.style.background = color;
      add(it, el('span', 't', text));
      if (band !== undefined) {
        it.title = 'highlight';
        it.addEventListener('mouseenter', function () { chart.highlight = band; chart.draw(); });
        it.addEventListener('mouseleave', function () { chart.highlight = undefined; chart.draw(); });
        it.addEventListener('click', function () {
          chart.details.pinned = true;
          if (band < p.bands.length) chart.details.site(p.bands[band], ['band ' + (band + 1) + ' of the timeline']);
        });
      }
      return it;
    }
    // Call sites whose short labels read the same (the same line, reached by other stacks) are
    // numbered, so each band's legend entry is its own.
    var seen = {};
    p.bands.forEach(function (site, b) {
      var text = shortLabel(data.sites[site].label);
      seen[text] = (seen[text] || 0) + 1;
      if (seen[text] > 1) text += ' (' + seen[text] + ')';
      item(chart.colorOf[b], '', text, b).title = data.sites[site].label;
    });
    item(OTHER, '', 'other call sites', p.bands.length);
    if (p.reserved.length) item(null, 'line', 'reserved (memory pools)');
    item(null, 'peak', 'peak');
    if (p.failures.length) item(null, 'oom', 'failed allocation');
    if (data.iterations.times.length) item(null, 'iter', 'iteration');
  }

  // ---- flame graphs (icicle: outermost frame at the top) ----
  var FLAME_H = 22;
  function flameColor(name) {
    var f = splitFrame(name);
    var h = 0;
    for (var i = 0; i < f.fn.length; i++) h = (h * 31 + f.fn.charCodeAt(i)) >>> 0;
    if (f.py) return 'hsl(' + (150 + h % 40) + ',45%,' + (72 + h % 10) + '%)';
    if (f.lib) return 'hsl(220,12%,' + (84 + h % 8) + '%)';
    return 'hsl(' + (18 + h % 32) + ',80%,' + (70 + h % 12) + '%)';
  }
  function Flame(parent, title, root, total, details, emptyText) {
    var head = add(parent, el('div', 'flame-head'));
    add(head, el('h3', '', title));
    this.crumb = add(head, el('span', 'hint', ''));
    this.box = add(parent, el('div', 'flame'));
    this.root = root; this.total = total; this.details = details; this.emptyText = emptyText;
    this.render([root]);
  }
  Flame.prototype.render = function (path) {
    var self = this, box = this.box;
    box.textContent = '';
    var focus = path[path.length - 1];
    if (!this.root.v) { add(box, el('div', 'empty', this.emptyText)); return; }
    var inner = add(box, el('div', 'canvas'));
    var depth = 0;
    function walk(node, level) { depth = Math.max(depth, level); (node.k || []).forEach(function (c) { walk(c, level + 1); }); }
    walk(focus, path.length - 1);
    inner.style.height = ((depth + 1) * FLAME_H + 4) + 'px';
    this.crumb.textContent = path.length > 1 ? 'zoomed: click a dim bar to zoom out' : 'click a bar to zoom';
    function place(node, level, left, width, ancestor, nodePath) {
      if (width < 0.1) return;
      var d = add(inner, el('div', 'node' + (ancestor ? ' ancestor' : ''), shortLabel(node.n)));
      d.style.left = left + '%'; d.style.width = 'calc(' + width + '% - 1px)';
      d.style.top = (level * FLAME_H) + 'px';
      d.style.background = level === 0 ? '#dfe4ee' : flameColor(node.n);
      d.addEventListener('mousemove', function (e) {
        showTip(e.clientX, e.clientY, node.n, [fmtBytes(node.v) + ' · ' + pct(node.v, self.total) + ' · ' +
          plural(node.c, 'allocation', 'allocations')]);
      });
      d.addEventListener('mouseleave', hideTip);
      d.addEventListener('click', function () {
        var frames = nodePath.map(function (n) { return n.n; }).slice(1).reverse();
        self.details.pinned = true;
        self.details.show(node.n, [fmtBytes(node.v) + ' (' + pct(node.v, self.total) + ') in ' +
          plural(node.c, 'allocation', 'allocations'), 'stack down to this frame, innermost first:'], frames);
        self.render(nodePath);
      });
      if (ancestor) return;
      var x = left;
      (node.k || []).forEach(function (c) {
        var w = node.v ? width * c.v / node.v : 0;
        place(c, level + 1, x, w, false, nodePath.concat([c]));
        x += w;
      });
    }
    for (var i = 0; i < path.length - 1; i++) place(path[i], i, 0, 100, true, path.slice(0, i + 1));
    place(focus, path.length - 1, 0, 100, false, path);
  };

  // ---- tables ----
  function Table(parent, title, rows, shareOf, shareLabel, details, emptyText) {
    add(parent, el('h3', '', title)).style.marginBottom = '6px';
    if (!rows.length) { add(parent, el('div', 'none table-wrap', emptyText)); return; }
    var wrap = add(parent, el('div', 'table-wrap'));
    var table = add(wrap, el('table', 'sites'));
    var cols = [
      { key: 'label', name: 'Call site', num: false },
      { key: 'bytes', name: 'Size', num: true },
      { key: 'count', name: 'Allocations', num: true },
      { key: 'share', name: shareLabel, num: true }];
    var items = rows.map(function (r) {
      var s = data.sites[r[0]];
      return { site: r[0], label: s.label, held: s.held_by, bytes: r[1], count: r[2], share: shareOf ? r[1] / shareOf : 0 };
    });
    var sort = { key: 'bytes', desc: true };
    var thead = add(table, el('thead')), tbody = add(table, el('tbody'));
    var hr = add(thead, el('tr'));
    var ths = cols.map(function (c) {
      var th = add(hr, el('th', c.num ? 'num' : '', c.name));
      th.addEventListener('click', function () {
        sort = { key: c.key, desc: sort.key === c.key ? !sort.desc : c.num };
        fill();
      });
      return th;
    });
    var maxBytes = Math.max.apply(null, items.map(function (i) { return i.bytes; }));
    function fill() {
      items.sort(function (a, b) {
        var x = a[sort.key], y = b[sort.key];
        var r = typeof x === 'string' ? x.localeCompare(y) : x - y;
        return sort.desc ? -r : r;
      });
      ths.forEach(function (th, k) {
        th.textContent = cols[k].name;
        if (cols[k].key === sort.key) add(th, el('span', 'arrow', sort.desc ? ' ▼' : ' ▲'));
      });
      tbody.textContent = '';
      items.forEach(function (it) {
        var tr = add(tbody, el('tr'));
        var td = add(tr, el('td', 'site'));
        add(td, el('div', 'fn', shortLabel(it.label)));
        var where = splitFrame(it.label).loc;
        if (where) add(td, el('div', 'loc', where));
        if (it.held) add(td, el('span', 'tag', 'held by ' + it.held));
        add(td, el('div', 'bar')).style.width = (maxBytes ? 100 * it.bytes / maxBytes : 0) + '%';
        add(tr, el('td', 'num', fmtBytes(it.bytes)));
        add(tr, el('td', 'num', fmtCount(it.count)));
        add(tr, el('td', 'num', shareOf ? pct(it.bytes, shareOf) : ''));
        function detail() {
          details.site(it.site, [fmtBytes(it.bytes) + ' in ' + plural(it.count, 'allocation', 'allocations') +
            (shareOf ? ' (' + pct(it.bytes, shareOf) + ' ' + shareLabel.toLowerCase() + ')' : '')]);
        }
        tr.addEventListener('mouseenter', function () { if (!details.pinned) detail(); });
        tr.addEventListener('click', function () {
          Array.prototype.forEach.call(tbody.children, function (r) { r.classList.remove('selected'); });
          tr.classList.add('selected');
          details.pinned = true; detail();
        });
      });
    }
    fill();
  }

  // ---- what would lower the peak (gpumem advise's ranked list) ----
  var SOURCE_TEXT = { modelled: 'modelled', extrapolated: 'extrapolated from two batch sizes' };
  function renderAdvice(app) {
    var a = data.advice;
    if (!a || (!a.refused && !a.verdict.length)) return;
    var card = add(app, el('section', 'card advice'));
    var head = add(card, el('div', 'card-head'));
    add(head, el('h2', '', 'What would lower the peak'));
    add(head, el('span', 'sub', 'as gpumem advise ranks it'));
    if (a.refused) {
      add(card, el('div', 'none refused', 'gpumem advise cannot answer for this trace: ' + a.refused));
      return;
    }
    var facts = add(card, el('div', 'facts'));
    function fact(k, v, sub, bad) {
      var f = add(facts, el('div', 'fact' + (bad ? ' bad' : '')));
      add(f, el('div', 'k', k)); add(f, el('div', 'v', v)); if (sub) add(f, el('div', 's', sub));
    }
    fact('Device memory', fmtBytes(a.device_memory), a.device_memory_recorded ? "the recorded device's" : '--device-memory');
    fact('Allocator', a.allocator, 'the run\'s');
    fact('Peak', fmtBytes(a.peak), 'reserved (modelled)');
    fact('The run', a.fits ? 'fits' : 'does not fit', '', !a.fits);
    var verdict = add(card, el('div', 'verdict'));
    a.verdict.forEach(function (line) { add(verdict, el('div', '', line)); });
    add(card, el('h3', 'remedies-head', a.heading));
    if (a.remedies.length) renderRemedies(card, a);
    var second = add(card, el('div', 'second'));
    add(second, el('div', 'hint', a.second_recording[0] + ':'));
    a.second_recording.slice(1).forEach(function (line) { add(second, el('div', 'command', line)); });
    a.notes.forEach(function (note) { add(card, el('div', 'hint note', 'note: ' + note)); });
  }
  function renderRemedies(parent, a) {
    var wrap = add(parent, el('div', 'table-wrap'));
    var table = add(wrap, el('table', 'sites remedies'));
    var hr = add(add(table, el('thead')), el('tr'));
    [['#', 'num'], ['Change', ''], ['Peak after', 'num'], ['Saving', 'num'],
      ['Fits ' + fmtBytes(a.device_memory), ''], ['From', '']].forEach(function (c) {
      add(hr, el('th', c[1], c[0]));
    });
    var tbody = add(table, el('tbody'));
    a.remedies.forEach(function (r) {
      var tr = add(tbody, el('tr'));
      tr.dataset.kind = r.kind;
      add(tr, el('td', 'num rank', r.rank + '.'));
      var change = add(tr, el('td', 'change'));
      add(change, el('div', 'what', r.change));
      if (r.site_heading) {
        add(change, el('div', 'loc', r.site_heading));
        r.site.forEach(function (line) { add(change, el('div', 'line', line)); });
      }
      if (r.holder_heading) {
        add(change, el('div', 'loc', r.holder_heading));
        r.holder.forEach(function (line) { add(change, el('div', 'line', line)); });
      }
      add(tr, el('td', 'num', fmtBytes(r.peak)));
      add(tr, el('td', 'num', fmtBytes(r.saving) + ' less'));
      add(tr, el('td', r.fits ? 'fits' : 'fits no', r.fits ? 'fits' : 'does not fit'));
      add(tr, el('td', 'source', SOURCE_TEXT[r.source] || r.source));
    });
  }

  // ---- the page ----
  function render() {
    var app = document.getElementById('app');
    document.title = 'gpumem · ' + (data.command.length ? data.command.join(' ') : data.trace);
    renderHeader(app);
    data.places.forEach(function (p, index) {
      var card = add(app, el('section', 'card place'));
      card.dataset.place = String(p.place);
      var head = add(card, el('div', 'card-head'));
      add(head, el('h2', '', p.name));
      add(head, el('span', 'sub', 'peak ' + fmtBytes(p.peak.bytes) + ' at ' + fmtTime(p.peak.t) +
        ' · never freed ' + fmtBytes(p.leaked.bytes) +
        (p.failure_count ? ' · ' + plural(p.failure_count, 'failed allocation', 'failed allocations') : '')));
      var grid = add(card, el('div', 'timeline-grid'));
      var left = add(grid, el('div', ''));
      var tools = add(left, el('div', 'card-head'));
      add(tools, el('span', 'hint', 'Memory in use by call site · wheel to zoom · drag to pan · double-click to reset · click a band for its stack'));
      var buttons = add(tools, el('span', ''));
      var reset = add(buttons, el('button', 'small', 'Reset zoom'));
      buttons.appendChild(document.createTextNode(' '));
      var whole = add(buttons, el('button', 'small', 'Whole run'));
      var details = new Details(grid);
      var chart = new Chart(p, index, left, details);
      charts.push(chart);
      reset.addEventListener('click', function () { chart.defaultView(); chart.draw(); });
      whole.addEventListener('click', function () { chart.setView(chart.tmin, chart.tmax); });
      renderLegend(left, chart);
      var flames = add(card, el('div', 'flames'));
      new Flame(add(flames, el('div', 'flame-panel')), 'Live at the peak · ' + fmtBytes(p.peak.bytes),
        p.flame_peak, p.peak.bytes, details, 'nothing was live at the peak');
      new Flame(add(flames, el('div', 'flame-panel')), (data.footer ? 'Never freed · ' : 'Live at the end · ') +
        fmtBytes(p.leaked.bytes), p.flame_leak, p.leaked.bytes, details, 'everything was freed');
      var tables = add(card, el('div', 'tables'));
      new Table(add(tables, el('div', '')), 'Call sites at the peak', p.peak_sites, p.peak.bytes,
        'Of peak', details, 'nothing was live at the peak');
      new Table(add(tables, el('div', 'leaks')), data.footer ? 'Never freed' : 'Live at the end', p.leak_sites,
        p.leaked.bytes, 'Of leaked', details, 'everything was freed');
    });
    if (!data.places.length) add(add(app, el('section', 'card')), el('div', 'none', 'No memory was allocated in this trace.'));
    renderAdvice(app);
    var sum = add(app, el('section', 'card'));
    var det = add(sum, el('details'));
    det.open = true;
    add(det, el('summary', '', 'Summary table (torch.cuda.memory_summary() layout)'));
    add(det, el('pre', 'summary', data.summary)).style.marginTop = '10px';
    if (data.iterations.count) {
      add(app, el('footer', 'foot', plural(data.iterations.count, 'iteration', 'iterations') + ' marked: ' +
        data.iterations.rule + (data.iterations.stride > 1 ? ' (every ' + data.iterations.stride + 'th shown)' : '')));
    }
    add(app, el('footer', 'foot', 'gpumem view · ' + data.end));
    drawAll();
    hooks.drawnMs = performance.now();
    hooks.ready = true;
  }
  function drawAll() { charts.forEach(function (c) { c.draw(); }); }
  var resizeTimer = 0;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawAll, 60);
  });
  render();
})();
