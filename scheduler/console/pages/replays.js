// Replays and backfills: the record of them (who, when, what range, how many), one in detail
// (`#/replays?id=7`), and the forms that make them. A replay reads a stretch of an app's
// trigger topic back (by time or by offsets), filtered by job, trigger type and how the runs
// went, and runs those triggers again, here or in another app; a backfill emits the fires a
// job's schedule had in a past range that never fired. Permissions are the API's
// (api/replays.rs): a dry run (count, change nothing) needs VIEW on the apps concerned, a real
// one OPERATE on the app read and on the app the triggers go to, so a viewer gets the forms
// with the dry run fixed on.

import { html, useEffect, useState } from '../vendor/htm-preact-standalone.module.js';
import { get, post } from '../lib/api.js';
import { visibleApps } from '../lib/apps.js';
import { Time, fromLocalInput, toLocalInput } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { label, t } from '../lib/i18n.js';
import { can, canOperateSomewhere } from '../lib/session.js';
import { Badge, ConfirmButton, ErrorNote, Field, PagedFooter, Select, useLoad, useNotice, usePaged } from '../lib/ui.js';

const TRIGGER_TYPES = ['CRON', 'FIX_RATE', 'FIX_DELAY', 'MANUAL', 'API', 'RETRY', 'PARENT', 'MISFIRE', 'REPLAY', 'BACKFILL'];
const OUTCOMES = ['SUCCEEDED', 'FAILED', 'UNFINISHED', 'UNKNOWN'];
const HOUR_MS = 3600 * 1000;

export function ReplaysPage({ query }) {
  const apps = useLoad(() => visibleApps(), []);
  const names = (apps.value ?? []).map((app) => app.name);
  const [app, setApp] = useState(query.app ?? '');
  const list = usePaged('/api/replays', { app });
  const [open, setOpen] = useState(query.job ? 'backfill' : null);
  const [notice, setNotice] = useNotice();
  const operator = canOperateSomewhere();

  const recorded = (summary) => {
    list.reload();
    if (summary.operation) setNotice(t('replays.recorded', { id: summary.operation.id, n: summary.triggers }));
  };

  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('replays.title')} <${HelpLink} page="replays" /></h1>
        ${names.length > 0 && html`
          <button type="button" id="new-replay" aria-expanded=${open === 'replay'} aria-controls="replay-form"
            onClick=${() => setOpen(open === 'replay' ? null : 'replay')}>
            ${operator ? t('replays.new_replay') : t('replays.new_replay_dry')}</button>
          <button type="button" id="new-backfill" class="secondary" aria-expanded=${open === 'backfill'}
            aria-controls="backfill-form" onClick=${() => setOpen(open === 'backfill' ? null : 'backfill')}>
            ${operator ? t('replays.new_backfill') : t('replays.new_backfill_dry')}</button>`}
      </header>
      ${notice}
      ${query.id && html`<${ReplayDetail} key=${query.id} id=${query.id} />`}
      ${open === 'replay' && html`<${ReplayForm} apps=${names} initialApp=${app || (names.length === 1 ? names[0] : '')}
        onRecorded=${recorded} onClose=${() => setOpen(null)} />`}
      ${open === 'backfill' && html`<${BackfillForm} initialJob=${query.job ?? ''}
        onRecorded=${recorded} onClose=${() => setOpen(null)} />`}
      <h2>${t('replays.history')}</h2>
      <form class="filters" role="search" onSubmit=${(event) => event.preventDefault()}>
        <${Field} id="replays-app" label=${t('replays.app')}>${(d) => html`
          <${Select} id="replays-app" describedBy=${d} value=${app} empty=${t('common.any')} values=${names}
            onChange=${setApp} />`}<//>
        <button type="button" class="secondary" id="refresh-replays" onClick=${list.reload}>${t('common.refresh')}</button>
      </form>
      <div class="table-wrap">
        <table class="list" id="replays-table">
          <thead><tr>
            <th>${t('replays.id')}</th><th>${t('replays.kind')}</th><th>${t('replays.app')}</th>
            <th>${t('replays.job')}</th><th>${t('replays.range')}</th><th>${t('replays.triggers')}</th>
            <th>${t('replays.rate')}</th><th>${t('replays.requested_by')}</th><th>${t('replays.requested_at')}</th>
          </tr></thead>
          <tbody>${list.items.map((operation) => html`<${OperationRow} key=${operation.id} operation=${operation}
            selected=${String(operation.id) === query.id} />`)}</tbody>
        </table>
      </div>
      <${PagedFooter} paged=${list} />
    </section>
  `;
}

// The apps of an operation: the one read, and where its triggers went when elsewhere.
function Apps({ operation }) {
  if (operation.target_app === operation.app) return html`<code>${operation.app}</code>`;
  return html`<code>${operation.app}</code> → <code>${operation.target_app}</code>`;
}

function Range({ operation }) {
  if (operation.from_ms !== null && operation.from_ms !== undefined) {
    return html`<${Time} ms=${operation.from_ms} /> – <${Time} ms=${operation.to_ms} />`;
  }
  return html`<span>${t('replays.by_offsets')}</span>`;
}

function OperationRow({ operation, selected }) {
  return html`
    <tr data-replay=${operation.id} aria-current=${selected ? 'true' : undefined}>
      <td><a href=${`#/replays?id=${operation.id}`} data-action="show">${operation.id}</a></td>
      <td><${Badge} kind="operation_kind" value=${operation.kind} />
        ${operation.forced && html` <span class="badge">${t('replays.forced')}</span>`}</td>
      <td><${Apps} operation=${operation} /></td>
      <td>${operation.job_id ? html`<a href=${`#/jobs/${operation.job_id}`}>${operation.job_id}</a>` : html`<span class="muted">—</span>`}</td>
      <td><${Range} operation=${operation} /></td>
      <td>${operation.triggers}</td>
      <td>${t('replays.per_second', { n: operation.rate_per_second })}</td>
      <td>${operation.requested_by}</td>
      <td><${Time} ms=${operation.requested_at_ms} /></td>
    </tr>
  `;
}

function Offsets({ offsets }) {
  if (!offsets || offsets.length === 0) return html`<span class="muted">—</span>`;
  return html`<code>${offsets.map((bound) => `${bound.partition}: ${bound.from}–${bound.to}`).join(', ')}</code>`;
}

function List({ values, kind }) {
  if (!values || values.length === 0) return html`<span class="muted">${t('replays.all')}</span>`;
  return values.map((value) => (kind ? label(kind, value) : String(value))).join(', ');
}

// One replay or backfill, as recorded.
function ReplayDetail({ id }) {
  const found = useLoad(() => get(`/api/replays/${encodeURIComponent(id)}`), [id]);
  const operation = found.value;
  const selection = operation?.selection ?? {};
  const filter = selection.filter;
  return html`
    <section class="panel" id="replay-detail" aria-labelledby="replay-detail-title">
      <header class="page-head">
        <h2 id="replay-detail-title">${operation
          ? t('replays.detail_title', { id, kind: label('operation_kind', operation.kind) })
          : t('replays.detail_title', { id, kind: '' })}</h2>
        <a class="button secondary" href="#/replays" id="replay-detail-close">${t('common.close')}</a>
      </header>
      ${found.loading && !operation && html`<p class="muted">${t('common.loading')}</p>`}
      <${ErrorNote} error=${found.error} />
      ${operation && html`
        <dl class="facts">
          <dt>${t('replays.app')}</dt><dd><${Apps} operation=${operation} /></dd>
          ${operation.job_id && html`<dt>${t('replays.job')}</dt><dd><a href=${`#/jobs/${operation.job_id}`}>${operation.job_id}</a></dd>`}
          <dt>${t('replays.range')}</dt><dd><${Range} operation=${operation} /></dd>
          ${selection.range?.offsets && html`<dt>${t('replays.offsets')}</dt><dd><${Offsets} offsets=${selection.range.offsets} /></dd>`}
          ${selection.resolved_offsets && html`<dt>${t('replays.resolved_offsets')}</dt>
            <dd><${Offsets} offsets=${selection.resolved_offsets} /></dd>`}
          ${filter && html`
            <dt>${t('replays.job_filter')}</dt><dd><${List} values=${filter.job_ids} /></dd>
            <dt>${t('replays.types')}</dt><dd><${List} values=${filter.trigger_types} kind="trigger_type" /></dd>
            <dt>${t('replays.outcomes')}</dt><dd><${List} values=${filter.outcomes} kind="run_outcome" /></dd>`}
          ${selection.schedule && html`<dt>${t('replays.schedule')}</dt>
            <dd><code>${label('schedule_type', selection.schedule.type)}: ${selection.schedule.conf}</code></dd>`}
          <dt>${t('replays.triggers')}</dt><dd>${operation.triggers}</dd>
          <dt>${t('replays.rate')}</dt><dd>${t('replays.per_second', { n: operation.rate_per_second })}</dd>
          <dt>${t('replays.force')}</dt><dd>${operation.forced ? t('replays.yes') : t('replays.no')}</dd>
          <dt>${t('replays.requested_by')}</dt><dd>${operation.requested_by}</dd>
          <dt>${t('replays.requested_at')}</dt><dd><${Time} ms=${operation.requested_at_ms} /></dd>
        </dl>
        <details>
          <summary>${t('replays.selection_json')}</summary>
          <pre class="code">${JSON.stringify(operation.selection, null, 2)}</pre>
        </details>
        <p><a href=${`#/audit?target=${encodeURIComponent(operation.kind === 'BACKFILL' ? '/api/backfills' : '/api/replays')}&app=${encodeURIComponent(operation.app)}`}>
          ${t('replays.audit_link')}</a></p>`}
    </section>
  `;
}

// What a replay or backfill selected (a dry run) or did.
function Summary({ summary, id, kind }) {
  const operation = summary.operation;
  const read = summary.read;
  let heading;
  if (summary.dry_run) {
    heading = kind === 'BACKFILL' ? t('replays.dry_backfill_result', { n: summary.triggers }) : t('replays.dry_replay_result', { n: summary.triggers });
  } else {
    heading = t('replays.real_result', { id: operation?.id ?? '', n: summary.triggers });
  }
  return html`
    <div class="panel" id=${id} role="status" data-dry-run=${summary.dry_run ? 'true' : 'false'}>
      <h3>${heading}</h3>
      <dl class="facts">
        ${operation && html`<dt>${t('replays.id')}</dt><dd><a href=${`#/replays?id=${operation.id}`}>${operation.id}</a></dd>`}
        <dt>${t('replays.read')}</dt><dd>${t('replays.read_counts', { records: read.records, refused: read.refused })}</dd>
        <dt>${t('replays.resolved_offsets')}</dt><dd><${Offsets} offsets=${read.partitions} /></dd>
        ${summary.first && html`<dt>${t('replays.first')}</dt>
          <dd><code>${summary.first.trigger_id}</code> <${Time} ms=${summary.first.scheduled_at_ms} /></dd>`}
        ${summary.last && html`<dt>${t('replays.last')}</dt>
          <dd><code>${summary.last.trigger_id}</code> <${Time} ms=${summary.last.scheduled_at_ms} /></dd>`}
        ${summary.emitted_from_ms && html`<dt>${summary.dry_run ? t('replays.would_emit') : t('replays.emitting')}</dt>
          <dd><${Time} ms=${summary.emitted_from_ms} /> – <${Time} ms=${summary.emitted_until_ms} /></dd>`}
      </dl>
      ${summary.jobs.length > 0 && html`
        <div class="table-wrap">
          <table class="list">
            <thead><tr>
              <th>${t('replays.job')}</th><th>${t('replays.triggers')}</th>
              <th>${t('replays.first_scheduled')}</th><th>${t('replays.last_scheduled')}</th>
            </tr></thead>
            <tbody>${summary.jobs.map((share) => html`
              <tr key=${share.job_id}>
                <td><a href=${`#/jobs/${share.job_id}`}>${share.job_id}</a></td>
                <td>${share.triggers}</td>
                <td><${Time} ms=${share.first_scheduled_at_ms} /></td>
                <td><${Time} ms=${share.last_scheduled_at_ms} /></td>
              </tr>`)}</tbody>
          </table>
        </div>`}
    </div>
  `;
}

// Numbers of a list typed as "1, 2 3": the numbers, or null when one is not a positive integer.
function positiveIntegers(text) {
  const parts = text.split(/[\s,;]+/).filter(Boolean);
  const numbers = parts.map(Number);
  return numbers.every((number) => Number.isInteger(number) && number > 0) ? numbers : null;
}

// Offsets typed one partition a line, "0: 100-200": [{partition, from, to}], or null.
function parseOffsets(text) {
  const entries = text.split(/[\n,;]+/).map((entry) => entry.trim()).filter(Boolean);
  if (entries.length === 0) return null;
  const offsets = [];
  for (const entry of entries) {
    const found = /^(\d+)\s*:\s*(\d+)\s*(?:-|\.\.)\s*(\d+)$/.exec(entry);
    if (!found) return null;
    offsets.push({ partition: Number(found[1]), from: Number(found[2]), to: Number(found[3]) });
  }
  return offsets;
}

function toggle(list, value, on) {
  return on ? [...list.filter((one) => one !== value), value] : list.filter((one) => one !== value);
}

// The field an API answer is about, of `fields` (what the form shows), or null.
function fieldOf(error, fields) {
  if (!error) return null;
  if (error.field && fields.includes(error.field)) return error.field;
  const message = error.message ?? '';
  const rules = [
    ['rate', /rate_per_second/],
    ['force', /force/],
    ['offsets', /offsets|partition/],
    ['to', /to_ms|end the range|from_ms/],
    ['job', /^(invalid )?job /],
    ['target', /target/],
  ];
  if (error.status !== 400 && error.status !== 404 && error.status !== 409) return null;
  for (const [field, pattern] of rules) {
    if (fields.includes(field) && pattern.test(message)) return field;
  }
  return null;
}

function Checks({ id, legend, values, kind, chosen, onChange, hint }) {
  return html`
    <fieldset class="field wide" id=${id} aria-describedby=${hint ? `${id}-hint` : undefined}>
      <legend>${legend}</legend>
      <div class="buttons">
        ${values.map((value) => html`
          <label class="inline"><input type="checkbox" id=${`${id}-${value}`} value=${value}
            checked=${chosen.includes(value)} onChange=${(event) => onChange(toggle(chosen, value, event.target.checked))} />
            ${label(kind, value)}</label>`)}
      </div>
      ${hint && html`<small class="hint" id=${`${id}-hint`}>${hint}</small>`}
    </fieldset>
  `;
}

function ReplayForm({ apps, initialApp, onRecorded, onClose }) {
  const [form, setForm] = useState({
    app: initialApp,
    mode: 'time',
    from: toLocalInput(Date.now() - HOUR_MS),
    to: toLocalInput(Date.now()),
    offsets: '',
    jobs: '',
    types: [],
    outcomes: [],
    target: '',
    rate: '',
    force: false,
    dry: true,
  });
  const [errors, setErrors] = useState({});
  const [failure, setFailure] = useState(null);
  const [result, setResult] = useState(null);
  const [sending, setSending] = useState(false);
  const set = (name) => (value) => setForm((previous) => ({ ...previous, [name]: value }));
  const text = (name) => (event) => set(name)(event.target.value);
  const mayRun = Boolean(form.app) && can(form.app, 'OPERATE') && (!form.target || can(form.target, 'OPERATE'));
  const dry = form.dry || !mayRun;
  const fields = ['app', 'from', 'to', 'offsets', 'job', 'target', 'rate', 'force'];

  // The request body of the form, or the errors that keep it from being sent.
  const body = (dryRun) => {
    const found = {};
    const request = { app: form.app, force: form.force, dry_run: dryRun };
    if (!form.app) found.app = t('replays.app_required');
    if (form.mode === 'time') {
      request.from_ms = fromLocalInput(form.from);
      request.to_ms = fromLocalInput(form.to);
      if (request.from_ms === undefined) found.from = t('replays.time_required');
      if (request.to_ms === undefined) found.to = t('replays.time_required');
      else if (request.from_ms !== undefined && request.from_ms >= request.to_ms) found.to = t('replays.range_invalid');
    } else {
      request.offsets = parseOffsets(form.offsets);
      if (!request.offsets) found.offsets = t('replays.offsets_invalid');
      else if (request.offsets.some((bound) => bound.from > bound.to)) found.offsets = t('replays.offsets_backwards');
    }
    const jobs = positiveIntegers(form.jobs);
    if (!jobs) found.job = t('replays.jobs_invalid');
    request.job_ids = jobs ?? [];
    request.trigger_types = form.types;
    request.outcomes = form.outcomes;
    if (form.target && form.target !== form.app) request.target_app = form.target;
    if (form.rate.trim()) {
      const rate = Number(form.rate);
      if (!Number.isInteger(rate) || rate < 1) found.rate = t('replays.rate_invalid');
      request.rate_per_second = rate;
    }
    return { request, found };
  };

  const send = async (dryRun) => {
    setFailure(null);
    const { request, found } = body(dryRun);
    setErrors(found);
    if (Object.keys(found).length) return;
    setSending(true);
    try {
      const summary = await post('/api/replays', request);
      setResult(summary);
      if (!summary.dry_run) {
        setForm((previous) => ({ ...previous, dry: true }));
        onRecorded(summary);
      }
    } catch (error) {
      const field = fieldOf(error, form.mode === 'time' ? fields.filter((one) => one !== 'offsets') : fields);
      if (field) setErrors({ [field]: error.message });
      else setFailure(error);
    } finally {
      setSending(false);
    }
  };

  return html`
    <form class="panel" id="replay-form" novalidate aria-labelledby="replay-form-title"
      onSubmit=${(event) => { event.preventDefault(); send(dry); }}
      onKeyDown=${(event) => event.key === 'Escape' && onClose()}>
      <h2 id="replay-form-title">${t('replays.replay_title')}</h2>
      <p class="muted">${t('replays.replay_intro')}</p>
      <${Field} id="replay-app" label=${t('replays.app')} error=${errors.app}>${(d) => html`
        <${Select} id="replay-app" describedBy=${d} value=${form.app} empty=${t('replays.pick_app')} values=${apps}
          onChange=${set('app')} />`}<//>
      <fieldset class="field wide" id="replay-range">
        <legend>${t('replays.range')}</legend>
        <div class="buttons">
          <label class="inline"><input type="radio" name="replay-mode" id="replay-by-time" value="time"
            checked=${form.mode === 'time'} onChange=${() => set('mode')('time')} /> ${t('replays.by_time')}</label>
          <label class="inline"><input type="radio" name="replay-mode" id="replay-by-offsets" value="offsets"
            checked=${form.mode === 'offsets'} onChange=${() => set('mode')('offsets')} /> ${t('replays.by_offsets')}</label>
        </div>
      </fieldset>
      ${form.mode === 'time' && html`
        <${Field} id="replay-from" label=${t('replays.from')} hint=${t('replays.from_hint')} error=${errors.from}>${(d) => html`
          <input id="replay-from" type="datetime-local" step="1" aria-describedby=${d} value=${form.from} onInput=${text('from')} />`}<//>
        <${Field} id="replay-to" label=${t('replays.to')} hint=${t('replays.to_hint')} error=${errors.to}>${(d) => html`
          <input id="replay-to" type="datetime-local" step="1" aria-describedby=${d} value=${form.to} onInput=${text('to')} />`}<//>`}
      ${form.mode === 'offsets' && html`
        <${Field} id="replay-offsets" label=${t('replays.offsets')} hint=${t('replays.offsets_hint')} error=${errors.offsets} wide>${(d) => html`
          <textarea id="replay-offsets" rows="4" class="code" spellcheck=${false} aria-describedby=${d}
            placeholder=${t('replays.offsets_placeholder')} value=${form.offsets} onInput=${text('offsets')}></textarea>`}<//>`}
      <${Field} id="replay-jobs" label=${t('replays.job_filter')} hint=${t('replays.jobs_hint')} error=${errors.job}>${(d) => html`
        <input id="replay-jobs" inputmode="numeric" autocomplete="off" aria-describedby=${d} value=${form.jobs}
          onInput=${text('jobs')} />`}<//>
      <${Checks} id="replay-types" legend=${t('replays.types')} values=${TRIGGER_TYPES} kind="trigger_type"
        chosen=${form.types} onChange=${set('types')} hint=${t('replays.types_hint')} />
      <${Checks} id="replay-outcomes" legend=${t('replays.outcomes')} values=${OUTCOMES} kind="run_outcome"
        chosen=${form.outcomes} onChange=${set('outcomes')} hint=${t('replays.outcomes_hint')} />
      <${Field} id="replay-target" label=${t('replays.target_app')} hint=${t('replays.target_hint')} error=${errors.target}>${(d) => html`
        <${Select} id="replay-target" describedBy=${d} value=${form.target} empty=${t('replays.same_app')}
          values=${apps.filter((one) => one !== form.app)} onChange=${set('target')} />`}<//>
      <${Field} id="replay-rate" label=${t('replays.rate')} hint=${t('replays.rate_hint')} error=${errors.rate}>${(d) => html`
        <input id="replay-rate" type="number" min="1" step="1" aria-describedby=${d} value=${form.rate}
          onInput=${text('rate')} />`}<//>
      <div class="field wide">
        <label class="inline"><input type="checkbox" id="replay-force" checked=${form.force}
          aria-describedby=${errors.force ? 'replay-force-error' : 'replay-force-hint'}
          onChange=${(event) => set('force')(event.target.checked)} /> ${t('replays.force')}</label>
        <small class="hint" id="replay-force-hint">${t('replays.force_hint')}</small>
        ${errors.force && html`<small class="field-error" id="replay-force-error" role="alert">${errors.force}</small>`}
      </div>
      <div class="field wide">
        <label class="inline"><input type="checkbox" id="replay-dry-run" checked=${dry} disabled=${!mayRun}
          aria-describedby="replay-dry-run-hint" onChange=${(event) => set('dry')(event.target.checked)} /> ${t('replays.dry_run')}</label>
        <small class="hint" id="replay-dry-run-hint">${mayRun ? t('replays.dry_run_hint') : t('replays.dry_run_only')}</small>
      </div>
      <${ErrorNote} error=${failure} />
      <div class="buttons">
        <button type="submit" id="replay-submit" class=${dry ? '' : 'danger'} disabled=${sending}>
          ${dry ? t('replays.count_only') : t('replays.replay_now')}</button>
        <button type="button" class="secondary" onClick=${onClose}>${t('common.cancel')}</button>
      </div>
      ${result && html`<${Summary} summary=${result} id="replay-result" kind="REPLAY" />`}
      ${result && result.dry_run && result.triggers > 0 && mayRun && html`
        <div class="buttons"><span data-action="replay-for-real">
          <${ConfirmButton} danger label=${t('replays.replay_these')}
            question=${t('replays.replay_question', { n: result.triggers, app: form.target || form.app })}
            onConfirm=${() => send(false)} /></span></div>`}
    </form>
  `;
}

function BackfillForm({ initialJob, onRecorded, onClose }) {
  const [form, setForm] = useState({
    job: String(initialJob),
    from: toLocalInput(Date.now() - 2 * HOUR_MS),
    to: toLocalInput(Date.now() - HOUR_MS),
    rate: '',
    dry: true,
  });
  const [job, setJob] = useState({ value: null, error: null });
  const [errors, setErrors] = useState({});
  const [failure, setFailure] = useState(null);
  const [result, setResult] = useState(null);
  const [sending, setSending] = useState(false);
  const set = (name) => (value) => setForm((previous) => ({ ...previous, [name]: value }));
  const text = (name) => (event) => set(name)(event.target.value);
  const mayRun = Boolean(job.value) && can(job.value.app, 'OPERATE');
  const dry = form.dry || !mayRun;

  // The job typed, looked up as it is typed: its name and app (whose grant decides).
  useEffect(() => {
    const id = Number(form.job);
    if (!Number.isInteger(id) || id <= 0) {
      setJob({ value: null, error: null });
      return undefined;
    }
    let current = true;
    const timer = setTimeout(async () => {
      try {
        const found = await get(`/api/jobs/${id}`);
        if (current) setJob({ value: found, error: null });
      } catch (error) {
        if (current) setJob({ value: null, error });
      }
    }, 300);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [form.job]);

  const send = async (dryRun) => {
    setFailure(null);
    const found = {};
    const jobId = Number(form.job);
    const from_ms = fromLocalInput(form.from);
    const to_ms = fromLocalInput(form.to);
    if (!Number.isInteger(jobId) || jobId <= 0) found.job = t('replays.job_invalid');
    if (from_ms === undefined) found.from = t('replays.time_required');
    if (to_ms === undefined) found.to = t('replays.time_required');
    else if (from_ms !== undefined && from_ms >= to_ms) found.to = t('replays.range_invalid');
    else if (to_ms > Date.now()) found.to = t('replays.backfill_past');
    const request = { job_id: jobId, from_ms, to_ms, dry_run: dryRun };
    if (form.rate.trim()) {
      const rate = Number(form.rate);
      if (!Number.isInteger(rate) || rate < 1) found.rate = t('replays.rate_invalid');
      request.rate_per_second = rate;
    }
    setErrors(found);
    if (Object.keys(found).length) return;
    setSending(true);
    try {
      const summary = await post('/api/backfills', request);
      setResult(summary);
      if (!summary.dry_run) {
        setForm((previous) => ({ ...previous, dry: true }));
        onRecorded(summary);
      }
    } catch (error) {
      const field = fieldOf(error, ['job', 'to', 'rate']);
      if (field) setErrors({ [field]: error.message });
      else setFailure(error);
    } finally {
      setSending(false);
    }
  };

  const jobHint = job.value
    ? t('replays.job_found', { name: job.value.name, app: job.value.app })
    : t('replays.job_hint');
  return html`
    <form class="panel" id="backfill-form" novalidate aria-labelledby="backfill-form-title"
      onSubmit=${(event) => { event.preventDefault(); send(dry); }}
      onKeyDown=${(event) => event.key === 'Escape' && onClose()}>
      <h2 id="backfill-form-title">${t('replays.backfill_title')}</h2>
      <p class="muted">${t('replays.backfill_intro')}</p>
      <${Field} id="backfill-job" label=${t('replays.job')} hint=${jobHint}
        error=${errors.job ?? job.error?.message}>${(d) => html`
        <input id="backfill-job" inputmode="numeric" autocomplete="off" aria-describedby=${d} value=${form.job}
          onInput=${text('job')} />`}<//>
      <${Field} id="backfill-from" label=${t('replays.from')} error=${errors.from}>${(d) => html`
        <input id="backfill-from" type="datetime-local" step="1" aria-describedby=${d} value=${form.from} onInput=${text('from')} />`}<//>
      <${Field} id="backfill-to" label=${t('replays.to')} hint=${t('replays.backfill_to_hint')} error=${errors.to}>${(d) => html`
        <input id="backfill-to" type="datetime-local" step="1" aria-describedby=${d} value=${form.to} onInput=${text('to')} />`}<//>
      <${Field} id="backfill-rate" label=${t('replays.rate')} hint=${t('replays.rate_hint')} error=${errors.rate}>${(d) => html`
        <input id="backfill-rate" type="number" min="1" step="1" aria-describedby=${d} value=${form.rate}
          onInput=${text('rate')} />`}<//>
      <div class="field wide">
        <label class="inline"><input type="checkbox" id="backfill-dry-run" checked=${dry} disabled=${!mayRun}
          aria-describedby="backfill-dry-run-hint" onChange=${(event) => set('dry')(event.target.checked)} /> ${t('replays.dry_run')}</label>
        <small class="hint" id="backfill-dry-run-hint">${mayRun ? t('replays.dry_run_hint') : t('replays.dry_run_only_job')}</small>
      </div>
      <${ErrorNote} error=${failure} />
      <div class="buttons">
        <button type="submit" id="backfill-submit" class=${dry ? '' : 'danger'} disabled=${sending}>
          ${dry ? t('replays.count_only') : t('replays.backfill_now')}</button>
        <button type="button" class="secondary" onClick=${onClose}>${t('common.cancel')}</button>
      </div>
      ${result && html`<${Summary} summary=${result} id="backfill-result" kind="BACKFILL" />`}
      ${result && result.dry_run && result.triggers > 0 && mayRun && html`
        <div class="buttons"><span data-action="backfill-for-real">
          <${ConfirmButton} danger label=${t('replays.backfill_these')}
            question=${t('replays.backfill_question', { n: result.triggers, job: form.job })}
            onConfirm=${() => send(false)} /></span></div>`}
    </form>
  `;
}
