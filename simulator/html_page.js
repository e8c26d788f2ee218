// Behaviour of the `simulate --html` page (inlined into the page by simulator/html.py).
// Legend: hover a job to highlight its nodes, click to keep it highlighted.
// Search: a job, node or HyperNode by name (exact, then prefix, then substring match);
// Enter shows the next match: its collapsed ancestors open, it is highlighted and scrolled to.
// The page also searches on load for `#find=NAME` in its address.
(function () {
  'use strict';
  var body = document.body;
  var input = document.getElementById('search');
  var status = document.getElementById('search-status');
  var pinned = null; // job class kept highlighted after a click or a search
  var index = null; // every searchable thing, built on first use
  var found = []; // matches of the current query
  var at = -1; // the match shown last
  var opened = []; // boxes the last match opened, closed again when the next one is shown

  function highlightJob(cls) {
    document.querySelectorAll('.node.hl').forEach(function (n) { n.classList.remove('hl'); });
    body.classList.toggle('focus', !!cls);
    if (cls) {
      document.querySelectorAll('.node.' + cls).forEach(function (n) { n.classList.add('hl'); });
    }
    document.querySelectorAll('.legend-entry').forEach(function (e) {
      e.classList.toggle('pinned', !!pinned && e.getAttribute('data-class') === pinned);
    });
  }

  function reveal(el) {
    for (var p = el.parentElement; p; p = p.parentElement) {
      if (p.tagName === 'DETAILS' && !p.open) { p.open = true; opened.push(p); }
    }
  }

  function path(el) {
    var names = [];
    for (var p = el.parentElement; p; p = p.parentElement) {
      if (p.classList && p.classList.contains('hn') && p.getAttribute('data-hn')) {
        names.push(p.getAttribute('data-hn'));
      }
    }
    return names.length ? ' in ' + names.join(' \u203a ') : '';
  }

  function buildIndex() {
    index = [];
    document.querySelectorAll('.legend-entry[data-job]').forEach(function (e) {
      index.push({ kind: 'job', name: e.getAttribute('data-job'), el: e });
    });
    document.querySelectorAll('.hn[data-hn]').forEach(function (e) {
      index.push({ kind: 'HyperNode', name: e.getAttribute('data-hn'), el: e });
    });
    document.querySelectorAll('.node[data-node]').forEach(function (e) {
      index.push({ kind: 'node', name: e.getAttribute('data-node'), el: e });
    });
    index.forEach(function (x) { x.low = x.name.toLowerCase(); });
  }

  function matches(query) {
    var q = query.trim().toLowerCase();
    if (!q) { return []; }
    if (!index) { buildIndex(); }
    var exact = [], prefix = [], inside = [];
    index.forEach(function (x) {
      // A job "ns/name" also matches its bare name exactly.
      var bare = x.kind === 'job' ? x.low.slice(x.low.indexOf('/') + 1) : x.low;
      if (x.low === q || bare === q) { exact.push(x); }
      else if (x.low.indexOf(q) === 0 || bare.indexOf(q) === 0) { prefix.push(x); }
      else if (x.low.indexOf(q) >= 0) { inside.push(x); }
    });
    return exact.concat(prefix, inside);
  }

  function clearFound() {
    document.querySelectorAll('.found').forEach(function (e) { e.classList.remove('found'); });
  }

  function closeOpened() {
    while (opened.length) { opened.pop().open = false; }
  }

  function show(m) {
    clearFound();
    closeOpened();
    var target = m.el;
    var text = m.kind + ' ' + m.name;
    if (m.kind === 'job') {
      pinned = m.el.getAttribute('data-class');
      highlightJob(pinned);
      var cells = document.querySelectorAll('.node.' + pinned);
      cells.forEach(reveal);
      var pending = document.querySelector('.pending-job[data-job="' + CSS.escape(m.name) + '"]');
      if (cells.length) {
        target = cells[0];
        text += ': ' + cells.length + ' node' + (cells.length === 1 ? '' : 's');
      } else if (pending) {
        target = pending;
        pending.classList.add('found');
        text += ': no pod running, see why below';
      }
    } else {
      pinned = null;
      highlightJob(null);
      reveal(m.el);
      if (m.kind === 'HyperNode' && !m.el.open) { m.el.open = true; opened.push(m.el); }
      m.el.classList.add('found');
      text += path(m.el);
    }
    if (found.length > 1) { text += ' (' + (at + 1) + ' of ' + found.length + ' matches, Enter for the next)'; }
    status.textContent = text;
    status.classList.remove('none');
    target.scrollIntoView({ block: 'center', inline: 'nearest' });
  }

  function search(query, step) {
    if (step === 0 || !found.length || found.query !== query) {
      found = matches(query);
      found.query = query;
      at = -1;
    }
    if (!found.length) {
      clearFound();
      status.textContent = query.trim() ? 'no job, node or HyperNode matches "' + query.trim() + '"' : '';
      status.classList.toggle('none', !!query.trim());
      return;
    }
    at = (at + 1) % found.length;
    show(found[at]);
  }

  input.addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter') { ev.preventDefault(); search(input.value, 1); }
    if (ev.key === 'Escape') {
      input.value = ''; found = []; pinned = null; clearFound(); closeOpened(); highlightJob(null);
      status.textContent = '';
    }
  });
  input.addEventListener('input', function () {
    var n = matches(input.value).length;
    found = [];
    status.classList.toggle('none', !n && !!input.value.trim());
    status.textContent = !input.value.trim() ? '' :
      (n ? n + ' match' + (n === 1 ? '' : 'es') + ', Enter to show' : 'no match');
  });
  document.getElementById('search-go').addEventListener('click', function () { search(input.value, 1); });
  document.getElementById('expand-all').addEventListener('click', function () {
    opened = [];
    document.querySelectorAll('#topology details').forEach(function (d) { d.open = true; });
  });
  document.getElementById('collapse-idle').addEventListener('click', function () {
    opened = [];
    document.querySelectorAll('#topology details.idle, #topology details.idle-run').forEach(function (d) {
      d.open = false;
    });
  });

  document.querySelectorAll('.legend-entry').forEach(function (e) {
    var cls = e.getAttribute('data-class');
    e.addEventListener('mouseenter', function () { highlightJob(cls); });
    e.addEventListener('mouseleave', function () { highlightJob(pinned); });
    e.addEventListener('click', function () {
      if (pinned === cls) { pinned = null; highlightJob(null); return; }
      var job = e.getAttribute('data-job');
      if (job) { input.value = job; search(job, 0); return; }
      pinned = cls; // pods of no job: highlight only
      highlightJob(cls);
    });
  });
  document.querySelectorAll('[data-find]').forEach(function (e) {
    e.addEventListener('click', function () {
      input.value = e.getAttribute('data-find');
      search(input.value, 0);
    });
  });

  var hash = decodeURIComponent(location.hash || '');
  if (hash.indexOf('#find=') === 0) {
    input.value = hash.slice(6);
    search(input.value, 0);
  }
})();
