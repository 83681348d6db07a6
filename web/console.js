// The outbox console's page: Preact components written with htm's tagged templates (no build step).
// Every value from the API (payloads, headers, keys, error messages) is interpolated as a child or an
// attribute, which Preact sets as a text node or a DOM property: nothing is ever parsed as HTML. The
// server's CSP requires Trusted Types, so an HTML sink fed a string would throw rather than render.
import { h, render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { bytes, duration, num, time } from './format.js';

const html = htm.bind(h);
const REFRESH_MS = 5000;

// ---------- the API ----------

let csrfToken = null;

async function api(path, options = {}) {
  const headers = {};
  let body;
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.body);
  }
  if (options.method && options.method !== 'GET') headers['x-csrf-token'] = csrfToken ?? '';
  const res = await fetch(path, { method: options.method ?? 'GET', headers, body, credentials: 'same-origin', cache: 'no-store' });
  const json = await res.json().catch(() => ({}));
  if (!res.ok) {
    const error = new Error(json?.error?.message ?? `${res.status} ${res.statusText}`);
    error.code = json?.error?.code;
    error.status = res.status;
    throw error;
  }
  return json;
}

const action = (body) => api('/api/actions', { method: 'POST', body });

// ---------- formatting: format.js ----------

// ---------- routing (the hash: #/overview, #/dead-letters?aggregateType=order, …) ----------

function parseHash() {
  const [path, search = ''] = location.hash.replace(/^#/, '').split('?');
  return { view: path.replace(/^\//, '') || 'overview', params: new URLSearchParams(search) };
}

function useHash() {
  const [route, setRoute] = useState(parseHash());
  useEffect(() => {
    const on = () => setRoute(parseHash());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

function go(view, params) {
  const search = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== '')).toString() : '';
  location.hash = `#/${view}${search ? `?${search}` : ''}`;
}

/** Loads `path` now and every REFRESH_MS; `reload` loads it again at once. */
function usePolled(path) {
  const [state, setState] = useState({ data: null, error: null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (!path) return undefined;
    let live = true;
    const load = () =>
      api(path)
        .then((data) => live && setState({ data, error: null }))
        .catch((error) => live && setState((s) => ({ data: s.data, error })));
    load();
    const timer = setInterval(load, REFRESH_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [path, tick]);
  return [state.data, state.error, useCallback(() => setTick((t) => t + 1), [])];
}

// ---------- small parts ----------

const Level = ({ level }) => html`<span class=${`badge level-${String(level).toLowerCase()}`} data-testid="level">${level}</span>`;

function Problem({ error }) {
  if (!error) return null;
  return html`<p class="problem" role="alert">${error.message ?? String(error)}</p>`;
}

function Section({ title, ok, reason, children, testid }) {
  return html`<section class="card" data-testid=${testid}>
    <h2>${title} ${ok === false ? html`<span class="badge level-critical">unreadable</span>` : null}</h2>
    ${ok === false ? html`<p class="problem">${reason}</p>` : children}
  </section>`;
}

function KeyValues({ rows }) {
  return html`<dl class="kv">${rows.filter(Boolean).map(([k, v]) => html`<dt>${k}</dt><dd>${v}</dd>`)}</dl>`;
}

// ---------- the confirmation ----------

/**
 * Every action goes through this dialog: it says what will happen (a dry run of a replay, the parked
 * rows of a release, the connector call), and only the Confirm button runs it.
 */
function Confirm({ plan, onClose, onDone }) {
  const dialog = useRef(null);
  const [preview, setPreview] = useState({ loading: Boolean(plan.preview), data: null, error: null });
  const [running, setRunning] = useState(false);
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);

  useEffect(() => {
    dialog.current?.showModal();
    if (!plan.preview) return;
    plan
      .preview()
      .then((data) => setPreview({ loading: false, data, error: null }))
      .catch((e) => setPreview({ loading: false, data: null, error: e }));
  }, []);

  const run = async () => {
    setRunning(true);
    setError(null);
    try {
      setResult(await action(plan.request));
      onDone?.();
    } catch (e) {
      setError(e);
    } finally {
      setRunning(false);
    }
  };
  const close = () => {
    dialog.current?.close();
    onClose();
  };
  const nothing = plan.isEmpty && preview.data ? plan.isEmpty(preview.data) : false;
  return html`<dialog ref=${dialog} class="confirm" data-testid="confirm" onCancel=${close}>
    <h2>${plan.title}</h2>
    <p class="what">${plan.what}</p>
    ${plan.preview
      ? html`<div class="preview" data-testid="confirm-preview">
          ${preview.loading ? html`<p>Working out what this would do…</p>` : null}
          ${preview.error ? html`<${Problem} error=${preview.error} />` : null}
          ${preview.data ? plan.describe(preview.data) : null}
        </div>`
      : null}
    ${result ? html`<div class="result" data-testid="confirm-result"><h3>Done</h3>${plan.describeResult(result)}</div>` : null}
    <${Problem} error=${error} />
    <div class="buttons">
      ${result
        ? html`<button type="button" onClick=${close} data-testid="confirm-close">Close</button>`
        : html`<button type="button" onClick=${close} disabled=${running}>Cancel</button>
            <button type="button" class="danger" data-testid="confirm-run" onClick=${run} disabled=${running || preview.loading || Boolean(preview.error) || nothing}>${running ? 'Running…' : plan.confirmLabel}</button>`}
    </div>
  </dialog>`;
}

const letterList = (letters) =>
  letters.length === 0
    ? html`<p>None.</p>`
    : html`<ul class="ids">${letters.map((l) => html`<li><code>${l.id ?? '(no id)'}</code> key <code>${l.key}</code>${l.errorCode ? ` (${l.errorCode})` : ''}</li>`)}</ul>`;

/** What the confirmation of each action shows and sends. */
const plans = {
  replay: ({ aggregateType, consumer, key, id, label }) => {
    const request = { action: 'replay', aggregateType, consumer, key, id };
    const which = id ? `this dead letter (event ${id}, key ${key})` : key ? `the outstanding dead letters of key ${key}` : `every outstanding ${aggregateType} dead letter`;
    return {
      title: `Replay ${label}`,
      what: `Re-publishes ${which} for consumer ${consumer ?? '(the default)'} to the original topic, as outbox dlq:replay does. The router applies each through its inbox (never twice) and releases the key once its earliest parked event is applied.`,
      request,
      confirmLabel: 'Replay',
      preview: () => action({ ...request, dryRun: true }),
      isEmpty: (d) => d.replayed === 0,
      describe: (d) =>
        html`<p>Would replay <strong data-testid="would-replay">${d.replayed}</strong> dead letter(s) of ${d.dlqTopic} for consumer ${d.consumer} (scanned ${d.scanned}):</p>
          ${letterList(d.letters)} ${d.replayed === 0 ? html`<p>Nothing outstanding for this consumer: nothing to do.</p>` : null}`,
      describeResult: (r) =>
        html`<p data-testid="replayed">Replayed ${r.replayed} dead letter(s).</p>
          ${r.stillParked.length ? html`<p class="problem">Still parked: ${r.stillParked.map((k) => `${k.key} (${k.reason})`).join(', ')}</p>` : html`<p>Every replayed key was released.</p>`}`,
    };
  },
  release: ({ aggregateType, consumer, key, id, label }) => {
    const request = { action: 'release', aggregateType, consumer, key, id };
    return {
      title: `Release ${label}`,
      what: id
        ? `Gives up on this one parked event (it stays in the dead-letter topic, and is not applied): the key's next parked event becomes its head, as outbox dlq:release --id does.`
        : `Gives up on every parked event of the key (they stay in the dead-letter topic and are not applied) so the router applies the key's new events again, as outbox dlq:release --key does.`,
      request,
      confirmLabel: 'Release',
      preview: () => action({ ...request, preview: true }),
      isEmpty: (d) => d.wouldRelease.length === 0,
      describe: (d) =>
        html`<p>Would release <strong data-testid="would-release">${d.wouldRelease.length}</strong> parked event(s) for consumer ${d.consumer}:</p>
          <ul class="ids">${d.wouldRelease.map((r) => html`<li><code>${r.eventId}</code> key <code>${r.aggregateId}</code> (${r.errorCode})</li>`)}</ul>`,
      describeResult: (r) =>
        html`<p data-testid="released">Released ${r.released.length} parked event(s).</p>
          ${r.parkedAgain && r.parkedAgain.length ? html`<p class="problem">Parked again: ${r.parkedAgain.map((k) => `${k.aggregateId} (${k.errorCode})`).join(', ')}</p>` : null}`,
    };
  },
  connector: (operation, name) => {
    const what = {
      restart: `Restarts the failed parts of connector ${name} (running tasks are left alone), as outbox connector:restart does.`,
      pause: `Pauses connector ${name}: it stops streaming and keeps its slot, which then retains WAL until it is resumed (outbox connector:pause).`,
      resume: `Resumes connector ${name} (outbox connector:resume).`,
    }[operation];
    return {
      title: `${operation[0].toUpperCase()}${operation.slice(1)} the connector`,
      what,
      request: { action: `connector-${operation}` },
      confirmLabel: operation[0].toUpperCase() + operation.slice(1),
      describeResult: (r) => html`<p data-testid="connector-result">${r.connector}: ${r.result}</p>`,
    };
  },
};

/**
 * The one confirmation on screen, held by the page rather than by the row that opened it: an action
 * can make its row leave the list (a replayed letter, a released key), and its result must stay shown.
 */
let openConfirm = () => {};

function ConfirmHost() {
  const [open, setOpen] = useState(null);
  openConfirm = (plan, onDone) => setOpen({ plan, onDone });
  if (!open) return null;
  return html`<${Confirm} plan=${open.plan} onClose=${() => setOpen(null)} onDone=${open.onDone} />`;
}

function ActionButton({ session, plan, label, testid, onDone }) {
  if (session.readOnly) return null;
  return html`<button type="button" class="action" data-testid=${testid} data-action="1" onClick=${() => openConfirm(plan(), onDone)}>${label}</button>`;
}

// ---------- charts ----------

function Chart({ title, series, names, format, testid }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const points = names.map((n) => series?.[n.key] ?? []);
    const times = (points[0] ?? []).map((p) => p.t / 1000);
    const data = [times, ...points.map((ps) => ps.map((p) => p.v))];
    if (!window.uPlot || !box.current) return;
    if (!plot.current) {
      plot.current = new window.uPlot(
        {
          width: Math.max(280, box.current.clientWidth - 8),
          height: 180,
          series: [{}, ...names.map((n) => ({ label: n.label, stroke: n.color, width: 2, spanGaps: false, value: (_u, v) => (v === null ? '—' : format(v)) }))],
          axes: [{}, { values: (_u, ticks) => ticks.map(format), size: 70 }],
          legend: { live: false },
        },
        data,
        box.current,
      );
    } else {
      plot.current.setData(data);
    }
  }, [series]);
  useEffect(() => () => plot.current?.destroy(), []);
  const count = (series?.[names[0].key] ?? []).length;
  return html`<figure class="chart" data-testid=${testid}>
    <figcaption>${title} <small>(${count} sample${count === 1 ? '' : 's'})</small></figcaption>
    <div ref=${box}></div>
  </figure>`;
}

function Charts() {
  const [data, error] = usePolled('/api/series');
  const s = data?.series;
  return html`<section class="card wide" data-testid="charts">
    <h2>Last hour <small>sampled by the console every ${data ? duration(data.sampleIntervalMs) : '…'}</small></h2>
    <${Problem} error=${error} />
    <div class="charts">
      <${Chart} testid="chart-slot" title="Replication slot" series=${s} format=${bytes}
        names=${[{ key: 'slotLagBytes', label: 'unconfirmed WAL', color: '#c0392b' }, { key: 'slotRetainedBytes', label: 'retained WAL', color: '#2c3e50' }]} />
      <${Chart} testid="chart-lag" title="Consumer lag (records)" series=${s} format=${(v) => num(Math.round(v))}
        names=${[{ key: 'consumerLag', label: 'lag', color: '#8e44ad' }]} />
      <${Chart} testid="chart-latency" title="Commit → handled" series=${s} format=${(v) => `${v} ms`}
        names=${[{ key: 'latencyP50Ms', label: 'p50', color: '#27ae60' }, { key: 'latencyP99Ms', label: 'p99', color: '#e67e22' }]} />
    </div>
  </section>`;
}

// ---------- overview ----------

function Overview({ session }) {
  const [data, error, reload] = usePolled('/api/overview');
  const snap = data?.snapshot;
  if (!snap) return html`<${Problem} error=${error} /><p>${error ? '' : 'Waiting for the first sample…'}</p>`;
  const st = snap.status;
  const c = st.connector;
  const slots = st.slots;
  const slot = snap.slot;
  const out = st.outboxTable;
  return html`<div class="overview" data-testid="overview">
    <${Problem} error=${error} />
    <section class="card wide verdict" data-testid="verdict">
      <h2>Pipeline <${Level} level=${st.verdict.level} /> <small>sampled ${time(snap.sampledAt)}</small></h2>
      ${st.verdict.reasons.length === 0
        ? html`<p>Everything is OK.</p>`
        : html`<ul class="reasons">${st.verdict.reasons.map((r) => html`<li><${Level} level=${r.level} /> ${r.message}</li>`)}</ul>`}
    </section>
    <div class="grid">
      <${Section} title="Connector" ok=${c.ok} reason=${c.error} testid="connector">
        ${c.ok
          ? html`<${KeyValues} rows=${[
                ['name', c.name],
                ['state', c.deployed ? html`<strong data-testid="connector-state">${c.state ?? 'no status yet'}</strong>` : 'not deployed'],
                ['worker', c.worker ?? '—'],
                ['restarts seen', `${snap.restarts} in the last hour`],
              ]} />
              ${c.trace ? html`<pre class="trace">${c.trace}</pre>` : null}
              <table><thead><tr><th>task</th><th>state</th><th>worker</th></tr></thead>
                <tbody>${c.tasks.map((t) => html`<tr><td>${t.id}</td><td>${t.state}</td><td>${t.worker}</td></tr>${t.trace ? html`<tr><td colspan="3"><pre class="trace">${t.trace}</pre></td></tr>` : null}`)}</tbody></table>
              ${snap.taskChanges.length ? html`<p class="note">Task changes: ${snap.taskChanges.map((t) => `${time(t.at)} task ${t.task} ${t.from} → ${t.to}`).join('; ')}</p>` : null}
              ${c.deployed
                ? html`<div class="buttons">
                    <${ActionButton} session=${session} testid="connector-restart" label="Restart failed" plan=${() => plans.connector('restart', c.name)} onDone=${reload} />
                    <${ActionButton} session=${session} testid="connector-pause" label="Pause" plan=${() => plans.connector('pause', c.name)} onDone=${reload} />
                    <${ActionButton} session=${session} testid="connector-resume" label="Resume" plan=${() => plans.connector('resume', c.name)} onDone=${reload} />
                  </div>`
                : null}`
          : null}
      <//>
      <${Section} title="Replication slot" ok=${slots.ok} reason=${slots.error} testid="slot">
        ${slots.ok
          ? html`<${KeyValues} rows=${[
              ['slot', slots.found ? slots.slotName : `${slots.slotName} (missing)`],
              slot && ['active', slot.active ? 'yes' : 'NO'],
              slot && ['wal_status', html`<span data-testid="wal-status">${slot.walStatus ?? '—'}</span>`],
              slot && ['unconfirmed WAL (lag)', bytes(slot.flushLagBytes)],
              slot && ['WAL retained', bytes(slot.retainedBytes)],
              slot && ['safe_wal_size', slot.safeWalSize === null ? 'unlimited' : bytes(slot.safeWalSize)],
              slot && ['retained growth', slot.retainedGrowthBytesPerSecond === null ? 'needs two samples' : `${bytes(slot.retainedGrowthBytesPerSecond)}/s`],
              slot && ['invalidation ETA', slot.etaInvalidationMs === null ? (slot.safeWalSize === null ? 'never (max_slot_wal_keep_size = -1)' : 'not growing') : duration(slot.etaInvalidationMs)],
            ]} />
            ${snap.slotError ? html`<p class="problem">${snap.slotError}</p>` : null}`
          : null}
      <//>
      <${Section} title="Outbox backlog" ok=${out.ok} reason=${out.error} testid="backlog">
        ${out.ok
          ? out.provisioned
            ? html`<${KeyValues} rows=${[
                ['table', out.table],
                ['rows waiting', `${num(out.pendingRows)}${out.pendingCapped ? '+' : ''}`],
                ['oldest waiting', out.oldestPendingAgeSeconds ? duration(out.oldestPendingAgeSeconds * 1000) : 'none'],
                ['size', bytes(out.totalBytes)],
                ['dead tuples', num(out.deadTuples)],
              ]} />${out.pendingError ? html`<p class="problem">${out.pendingError}</p>` : null}`
            : html`<p>${out.table} does not exist: the database is not provisioned (outbox db:provision).</p>`
          : null}
      <//>
      <${Section} title="Watchdog" ok=${st.watchdog.ok} reason=${st.watchdog.error} testid="watchdog">
        ${st.watchdog.ok
          ? st.watchdog.running
            ? st.watchdog.firing.length
              ? html`<ul class="reasons">${(st.watchdog.health?.alerts ?? st.watchdog.firing.map((name) => ({ name }))).map((a) => html`<li><${Level} level=${String(a.level ?? 'firing').toUpperCase()} /> ${a.name}${a.slot ? ` (${a.slot})` : ''}: ${a.summary ?? ''}</li>`)}</ul>`
              : html`<p>No alert firing (${st.watchdog.url}).</p>`
            : html`<p class="problem">The watchdog is not running at ${st.watchdog.url}: nobody is alerted when the slot grows (outbox watchdog).</p>`
          : null}
      <//>
      <${Section} title="Consumer groups" ok=${st.consumerGroups.ok} reason=${st.consumerGroups.error} testid="groups">
        ${st.consumerGroups.ok
          ? st.consumerGroups.groups.map(
              (g) => html`<div class="group">
                <p><strong>${g.groupId}</strong> ${g.state}, ${g.members} member(s), lag <strong data-testid="group-lag">${num(g.totalLag)}</strong></p>
                <table><thead><tr><th>topic</th><th>partition</th><th>committed</th><th>end</th><th>lag</th></tr></thead>
                  <tbody>${g.topics.flatMap((t) => t.partitions.map((p) => html`<tr><td>${t.topic}</td><td>${p.partition}</td><td>${p.committed ?? '—'}</td><td>${p.high}</td><td>${p.lag}</td></tr>`))}</tbody></table>
              </div>`,
            )
          : null}
      <//>
      <${Section} title="Dead letters and parked keys" ok=${st.dlq.ok && st.parked.ok} reason=${[st.dlq.error, st.parked.error].filter(Boolean).join(' ')} testid="dlq-summary">
        ${st.dlq.ok && st.parked.ok
          ? html`<${KeyValues} rows=${[
                ['parked keys', html`<a href="#/parked">${num(st.parked.totalKeys)} key(s), ${num(st.parked.totalEvents)} event(s)</a>`],
                ['oldest parked', st.parked.oldestAgeMs === null ? 'none' : duration(st.parked.oldestAgeMs)],
              ]} />
              <table><thead><tr><th>dead-letter topic</th><th>depth</th></tr></thead>
                <tbody>${st.dlq.topics.map((t) => html`<tr><td><a href=${`#/dead-letters?topic=${encodeURIComponent(t.topic)}`}>${t.topic}</a></td><td>${num(t.depth)}</td></tr>`)}</tbody></table>`
          : null}
      <//>
    </div>
    <${Charts} />
  </div>`;
}

// ---------- dead letters ----------

function Letter({ letter, session, aggregateType, onDone }) {
  const p = letter.payload;
  const label = `dead letter ${letter.id ?? letter.ref}`;
  return html`<article class="letter" data-testid="letter" data-id=${letter.id ?? ''}>
    <header>
      <span class=${`badge state-${letter.state}`} data-testid="letter-state">${letter.state}</span>
      <code class="id">${letter.id ?? '(no id)'}</code>
      <span>key <code data-testid="letter-key">${letter.key ?? '(none)'}</code></span>
      <span>${letter.eventType ?? '?'}</span>
      <span class="badge level-warning" data-testid="letter-error-code">${letter.errorCode ?? '?'}</span>
      <span>${letter.attempts ?? '?'} attempt(s)</span>
      <span>consumer ${letter.consumer ?? '(unknown)'}</span>
      <time>${time(letter.writtenAt)}</time>
    </header>
    <p class="error" data-testid="letter-error">${letter.errorMessage ?? ''}</p>
    <p class="note">from ${letter.original.topic ?? '?'} partition ${letter.original.partition ?? '?'} offset ${letter.original.offset ?? '?'}; dead letter at ${letter.ref}${letter.firstDeadLetteredAt ? `; first dead-lettered ${time(letter.firstDeadLetteredAt)}` : ''}</p>
    ${letter.reduced ? html`<p class="problem">Reduced: ${letter.reduced}</p>` : null}
    <div class="payload">
      <h3>Payload <small>${p.format ?? 'undecoded'}${p.schema ? ` ${p.schema}` : ''}, ${bytes(p.bytes)}${p.masked ? `, ${p.masked} field(s) masked` : ''}</small></h3>
      ${p.error ? html`<p class="problem" data-testid="payload-error">${p.error}</p>` : null}
      ${p.decoded !== null ? html`<pre data-testid="payload">${JSON.stringify(p.decoded, null, 2)}</pre>` : null}
      ${p.preview !== null ? html`<pre class="raw" data-testid="payload-raw">${p.preview}</pre>` : null}
    </div>
    <details>
      <summary>Headers (${Object.keys(letter.headers).length})</summary>
      <table class="headers"><tbody>${Object.entries(letter.headers).map(([k, v]) => html`<tr><th>${k}</th><td><code>${v}</code></td></tr>`)}</tbody></table>
    </details>
    ${letter.state === 'parked'
      ? html`<div class="buttons">
          <${ActionButton} session=${session} testid="replay-letter" label="Replay this letter" onDone=${onDone}
            plan=${() => plans.replay({ aggregateType, consumer: letter.consumer, key: letter.key, id: letter.id, label })} />
          <${ActionButton} session=${session} testid="replay-key" label="Replay the key" onDone=${onDone}
            plan=${() => plans.replay({ aggregateType, consumer: letter.consumer, key: letter.key, label: `key ${letter.key}` })} />
          <${ActionButton} session=${session} testid="release-event" label="Release this event" onDone=${onDone}
            plan=${() => plans.release({ aggregateType, consumer: letter.consumer, key: letter.key, id: letter.id, label: `event ${letter.id}` })} />
        </div>`
      : null}
  </article>`;
}

function DeadLetters({ session, params }) {
  const query = params.toString();
  const [data, error, reload] = usePolled(`/api/dead-letters?${query}`);
  const [form, setForm] = useState(Object.fromEntries(params));
  useEffect(() => setForm(Object.fromEntries(params)), [query]);
  const set = (name) => (e) => setForm({ ...form, [name]: e.currentTarget.value });
  const apply = (e) => {
    e.preventDefault();
    go('dead-letters', form);
  };
  const aggregateType = data?.aggregateType ?? params.get('aggregateType');
  const consumer = params.get('consumer');
  return html`<div class="dead-letters" data-testid="dead-letters">
    <${Problem} error=${error} />
    ${data?.readerError ? html`<p class="problem">${data.readerError}</p>` : null}
    <form class="filters card wide" onSubmit=${apply} data-testid="filters">
      <label>aggregate type
        <select value=${aggregateType ?? ''} onChange=${(e) => go('dead-letters', { aggregateType: e.currentTarget.value })} data-testid="filter-type">
          ${(data?.topics ?? []).map((t) => html`<option value=${t.aggregateType ?? ''}>${t.aggregateType ?? t.topic} (${t.cached})</option>`)}
        </select>
      </label>
      <label>consumer
        <select value=${form.consumer ?? ''} onChange=${set('consumer')} data-testid="filter-consumer">
          <option value="">any</option>${(data?.facets.consumers ?? []).map((c) => html`<option value=${c}>${c}</option>`)}
        </select>
      </label>
      <label>key <input value=${form.key ?? ''} onInput=${set('key')} data-testid="filter-key" /></label>
      <label>event type
        <select value=${form.eventType ?? ''} onChange=${set('eventType')} data-testid="filter-event-type">
          <option value="">any</option>${(data?.facets.eventTypes ?? []).map((c) => html`<option value=${c}>${c}</option>`)}
        </select>
      </label>
      <label>error code
        <select value=${form.errorCode ?? ''} onChange=${set('errorCode')} data-testid="filter-error-code">
          <option value="">any</option>${(data?.facets.errorCodes ?? []).map((c) => html`<option value=${c}>${c}</option>`)}
        </select>
      </label>
      <label>since <input type="datetime-local" value=${form.since ?? ''} onInput=${set('since')} /></label>
      <label>until <input type="datetime-local" value=${form.until ?? ''} onInput=${set('until')} /></label>
      <label>show
        <select value=${form.state ?? 'outstanding'} onChange=${set('state')} data-testid="filter-state">
          <option value="outstanding">outstanding (parked)</option><option value="all">every letter</option>
        </select>
      </label>
      <input type="hidden" value=${aggregateType ?? ''} />
      <button type="submit" onClick=${() => setForm({ ...form, aggregateType: aggregateType ?? '' })}>Filter</button>
    </form>
    ${aggregateType && consumer
      ? html`<div class="buttons"><${ActionButton} session=${session} testid="replay-all" label=${`Replay everything outstanding for ${consumer}`} onDone=${reload}
          plan=${() => plans.replay({ aggregateType, consumer, label: `every outstanding ${aggregateType} letter` })} /></div>`
      : null}
    ${data
      ? html`<p class="note" data-testid="letters-count">${data.topic ?? 'No dead-letter topic yet.'}: ${data.total} matching letter(s)${data.total > data.letters.length ? `, the newest ${data.letters.length} shown` : ''}.</p>
          ${data.letters.map((l) => html`<${Letter} key=${l.ref} letter=${l} session=${session} aggregateType=${aggregateType} onDone=${reload} />`)}`
      : html`<p>Loading…</p>`}
  </div>`;
}

// ---------- parked keys ----------

function Parked({ session }) {
  const [data, error, reload] = usePolled('/api/parked');
  return html`<div class="parked" data-testid="parked">
    <${Problem} error=${error} />
    ${data
      ? html`<p class="note">${num(data.totalKeys)} parked key(s), ${num(data.totalEvents)} parked event(s) in ${data.table}${data.totalKeys > data.keys.length ? `; the ${data.keys.length} with the most events shown` : ''}.</p>
          <table class="card wide">
            <thead><tr><th>consumer</th><th>type</th><th>key</th><th>events</th><th>head event</th><th>reason</th><th>parked</th><th></th></tr></thead>
            <tbody>${data.keys.map(
              (k) => html`<tr data-testid="parked-key" data-key=${k.aggregateId}>
                <td>${k.consumer}</td><td>${k.aggregateType}</td><td><code>${k.aggregateId}</code></td><td>${k.events}</td>
                <td><code>${k.headEventId}</code></td>
                <td><span class="badge level-warning">${k.headErrorCode}</span> ${k.reason ?? ''}</td>
                <td>${duration(k.ageMs)} ago</td>
                <td class="buttons">
                  <a href=${`#/dead-letters?aggregateType=${encodeURIComponent(k.aggregateType)}&key=${encodeURIComponent(k.aggregateId)}&consumer=${encodeURIComponent(k.consumer)}`}>letters</a>
                  <${ActionButton} session=${session} testid="replay-parked-key" label="Replay" onDone=${reload}
                    plan=${() => plans.replay({ aggregateType: k.aggregateType, consumer: k.consumer, key: k.aggregateId, label: `key ${k.aggregateId}` })} />
                  <${ActionButton} session=${session} testid="release-key" label="Release" onDone=${reload}
                    plan=${() => plans.release({ aggregateType: k.aggregateType, consumer: k.consumer, key: k.aggregateId, label: `key ${k.aggregateId}` })} />
                </td>
              </tr>`,
            )}</tbody>
          </table>`
      : html`<p>Loading…</p>`}
  </div>`;
}

// ---------- audit ----------

function Audit() {
  const [data, error] = usePolled('/api/audit');
  return html`<div class="audit" data-testid="audit">
    <${Problem} error=${error} />
    ${data
      ? data.path === null
        ? html`<p>This console is read-only: it takes no actions, so it keeps no audit log.</p>`
        : html`<p class="note">The newest entries of ${data.path}.</p>
            <table class="card wide"><thead><tr><th>when</th><th>who</th><th>what</th><th>phase</th><th>result</th></tr></thead>
              <tbody>${data.entries.map(
                (e) => html`<tr data-testid="audit-entry"><td>${time(e.at)}</td><td>${e.who.operator} (${e.who.via}${e.who.address ? `, ${e.who.address}` : ''})</td>
                  <td>${e.what.action} <code>${JSON.stringify(e.what.request)}</code></td><td>${e.phase}</td>
                  <td><code>${e.error ? `${e.error.code}: ${e.error.message}` : e.result ? JSON.stringify(e.result).slice(0, 300) : ''}</code></td></tr>`,
              )}</tbody></table>`
      : null}
  </div>`;
}

// ---------- the shell ----------

function SignIn({ session, onSignedIn }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    try {
      await api('/api/session', { method: 'POST', body: { token } });
      onSignedIn();
    } catch (err) {
      setError(err);
    }
  };
  return html`<form class="card signin" onSubmit=${submit} data-testid="sign-in">
    <h2>Sign in</h2>
    ${session.methods.includes('token')
      ? html`<label>Console token <input type="password" autocomplete="current-password" value=${token} onInput=${(e) => setToken(e.currentTarget.value)} data-testid="token" /></label>
          <button type="submit" data-testid="sign-in-submit">Sign in</button>`
      : html`<p>This console takes basic auth: reload the page and give the console's username and password.</p>`}
    <${Problem} error=${error} />
  </form>`;
}

function App() {
  const [session, setSession] = useState(null);
  const [error, setError] = useState(null);
  const route = useHash();
  const load = useCallback(() => {
    api('/api/session')
      .then((s) => {
        csrfToken = s.csrfToken;
        setSession(s);
      })
      .catch(setError);
  }, []);
  useEffect(load, []);
  if (!session) return html`<${Problem} error=${error} />`;
  if (!session.authenticated) return html`<main><h1>outbox console</h1><${SignIn} session=${session} onSignedIn=${load} /></main>`;
  const signOut = async () => {
    await api('/api/session', { method: 'DELETE' }).catch(() => {});
    load();
  };
  const tab = (view, label) => html`<a href=${`#/${view}`} class=${route.view === view ? 'active' : ''} data-testid=${`tab-${view}`}>${label}</a>`;
  return html`<div>
    <header class="top">
      <h1>outbox console</h1>
      <nav>${tab('overview', 'Overview')} ${tab('dead-letters', 'Dead letters')} ${tab('parked', 'Parked keys')} ${tab('audit', 'Audit log')}</nav>
      <span class="who">${session.readOnly ? html`<span class="badge level-warning" data-testid="read-only">read-only</span>` : null} ${session.operator}
        ${session.methods.includes('token') && session.operator ? html`<button type="button" onClick=${signOut}>Sign out</button>` : null}</span>
    </header>
    <main>
      ${route.view === 'dead-letters'
        ? html`<${DeadLetters} session=${session} params=${route.params} />`
        : route.view === 'parked'
          ? html`<${Parked} session=${session} />`
          : route.view === 'audit'
            ? html`<${Audit} />`
            : html`<${Overview} session=${session} />`}
    </main>
    <${ConfirmHost} />
  </div>`;
}

const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);
