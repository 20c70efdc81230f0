// A job's form: create, edit, or copy, with every field of a job, errors beside their
// field, and the next fires of the schedule previewed live in the job's time zone.

import { html, useEffect, useState } from '../vendor/htm-preact-standalone.module.js';
import { get, patch, post } from '../lib/api.js';
import { visibleApps } from '../lib/apps.js';
import { formatTime } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { t } from '../lib/i18n.js';
import { appsWith, can } from '../lib/session.js';
import { ErrorNote, Field, Select, useLoad, useNotice } from '../lib/ui.js';

const CHOICES = {
  schedule_type: ['CRON', 'FIX_RATE', 'FIX_DELAY', 'NONE'],
  misfire_strategy: ['DO_NOTHING', 'FIRE_ONCE_NOW'],
  route_strategy: ['FIRST', 'LAST', 'ROUND', 'RANDOM', 'CONSISTENT_HASH', 'LEAST_FREQUENTLY_USED',
    'LEAST_RECENTLY_USED', 'FAILOVER', 'BUSYOVER', 'SHARDING_BROADCAST'],
  block_strategy: ['SERIAL_EXECUTION', 'DISCARD_LATER', 'COVER_EARLY', 'CONCURRENT'],
  retry_backoff: ['NONE', 'FIXED', 'EXPONENTIAL'],
  glue_type: ['BEAN', 'GLUE_SHELL', 'GLUE_PYTHON', 'GLUE_NODEJS', 'GLUE_PHP', 'GLUE_POWERSHELL'],
  child_trigger_mode: ['EACH_SHARD', 'ALL_SHARDS'],
  history: ['ALL', 'FAILURES', 'NONE'],
};

const BLANK = {
  app: '', name: '', schedule_type: 'CRON', schedule_conf: '', time_zone: 'UTC',
  misfire_strategy: 'DO_NOTHING', route_strategy: 'FIRST', handler: '', params: '',
  block_strategy: 'SERIAL_EXECUTION', timeout_seconds: 0, author: '', alarm_emails: '',
  alarm_webhook: '', retry_count: 0, retry_backoff: 'NONE', retry_backoff_seconds: 0,
  retry_backoff_cap_seconds: 0, glue_type: 'BEAN', glue_source: '', glue_remark: '',
  child_job_ids: '', child_trigger_mode: 'EACH_SHARD', history: 'ALL',
};

// The most characters each one-line field takes: the API's limits
// (scheduler/src/model/limits.rs, whose tests check these numbers). Params and the script
// are limited in bytes, which a browser cannot count: the API's refusal says by how much.
const MAX_LENGTH = {
  name: 255, handler: 255, author: 255, schedule_conf: 255, time_zone: 64, alarm_webhook: 2048,
  glue_remark: 255,
};

const NUMBERS = ['timeout_seconds', 'retry_count', 'retry_backoff_seconds', 'retry_backoff_cap_seconds'];

// The form's values from a job as the API shows it.
function fromJob(job) {
  const form = { ...BLANK };
  for (const key of Object.keys(BLANK)) form[key] = job[key] ?? BLANK[key];
  form.alarm_emails = (job.alarm_emails ?? []).join(', ');
  form.child_job_ids = (job.child_job_ids ?? []).join(', ');
  form.alarm_webhook = job.alarm_webhook ?? '';
  form.glue_source = job.glue_source ?? '';
  return form;
}

// The request body of the form: lists split, numbers parsed, empty optionals left out.
function toRequest(form) {
  const body = { ...form };
  body.alarm_emails = form.alarm_emails.split(/[\s,;]+/).filter(Boolean);
  body.child_job_ids = form.child_job_ids.split(/[\s,]+/).filter(Boolean).map(Number);
  for (const key of NUMBERS) body[key] = Number(form[key]) || 0;
  body.alarm_webhook = form.alarm_webhook.trim() || null;
  // An empty name takes the handler's, as in XXL-JOB.
  body.name = form.name.trim() || undefined;
  body.glue_source = form.glue_type === 'BEAN' ? null : form.glue_source;
  return body;
}

// Only what changed: an edit by a user without the SCRIPTS grant must not resend the script.
function changes(before, after) {
  const changed = {};
  for (const [key, value] of Object.entries(after)) {
    if (JSON.stringify(value) !== JSON.stringify(before[key])) changed[key] = value;
  }
  return changed;
}

export function JobFormPage({ id, copy }) {
  const editing = Boolean(id) && !copy;
  const existing = useLoad(() => (id ? get(`/api/jobs/${id}`) : Promise.resolve(null)), [id]);
  const apps = useLoad(() => visibleApps(), []);
  const [form, setForm] = useState(null);
  const [start, setStart] = useState(false);
  const [error, setError] = useState(null);
  const [saving, setSaving] = useState(false);
  const [notice, setNotice] = useNotice();

  useEffect(() => {
    if (existing.loading) return;
    const base = existing.value ? fromJob(existing.value) : { ...BLANK };
    if (copy) base.name = t('job_form.copy_of', { name: base.name });
    setForm(base);
  }, [existing.loading, existing.value]);

  if (existing.error) return html`<section class="page"><${ErrorNote} error=${existing.error} /></section>`;
  if (!form) return html`<section class="page"><p class="muted">${t('common.loading')}</p></section>`;

  const writable = editing ? can(existing.value.app, 'OPERATE') : true;
  const operableApps = appsWith((apps.value ?? []).map((app) => app.name), 'OPERATE');
  const set = (name) => (value) => {
    setForm((previous) => ({ ...previous, [name]: value }));
    // A field's error goes once the field is changed.
    setError((previous) => (previous?.field === name ? null : previous));
  };
  const errorOf = (name) => (error?.field === name ? error.message : null);

  const submit = async (event) => {
    event.preventDefault();
    setSaving(true);
    setError(null);
    try {
      const body = toRequest(form);
      if (editing) {
        const saved = await patch(`/api/jobs/${id}`, changes(toRequest(fromJob(existing.value)), body));
        existing.reload();
        setNotice(t('job_form.saved', { id: saved.id }));
      } else {
        const saved = await post('/api/jobs', { ...body, start });
        window.location.hash = `#/jobs/${saved.id}`;
      }
    } catch (failure) {
      setError(failure);
    } finally {
      setSaving(false);
    }
  };

  const text = (name, extra = {}) => html`
    <${Field} id=${`job-${name}`} label=${t(`job_form.${name}`)} error=${errorOf(name)}
      hint=${extra.hint} wide=${extra.wide}>${(d) => (extra.multiline
        ? html`<textarea id=${`job-${name}`} rows=${extra.rows ?? 3} aria-describedby=${d} value=${form[name]}
            disabled=${!writable} class=${extra.code ? 'code' : ''} spellcheck=${extra.code ? false : undefined}
            onInput=${(e) => set(name)(e.target.value)}></textarea>`
        : html`<input id=${`job-${name}`} type=${extra.type ?? 'text'} min=${extra.type === 'number' ? 0 : undefined}
            aria-describedby=${d} value=${form[name]} disabled=${!writable} list=${extra.list}
            maxlength=${MAX_LENGTH[name]}
            required=${extra.required} onInput=${(e) => set(name)(e.target.value)} />`)}<//>`;
  const choice = (name) => html`
    <${Field} id=${`job-${name}`} label=${t(`job_form.${name}`)} error=${errorOf(name)}>${(d) => html`
      <${Select} id=${`job-${name}`} describedBy=${d} value=${form[name]} values=${CHOICES[name]} kind=${name}
        disabled=${!writable} onChange=${set(name)} />`}<//>`;

  const title = editing ? t('job_form.edit_title', { id }) : copy ? t('job_form.copy_title', { id }) : t('job_form.new_title');
  return html`
    <section class="page">
      <header class="page-head">
        <h1>${title} <${HelpLink} page="job_form" /></h1>
        ${editing && html`<a href=${`#/runs?job=${id}`}>${t('jobs.runs')}</a>`}
        ${editing && form.glue_type !== 'BEAN' && html`<a href=${`#/jobs/${id}/script`}>${t('jobs.script')}</a>`}
      </header>
      ${notice}
      <form class="job-form" id="job-form" onSubmit=${submit} novalidate>
        <fieldset>
          <legend>${t('job_form.basics')}</legend>
          <${Field} id="job-app" label=${t('job_form.app')} error=${errorOf('app')}>${(d) => html`
            <${Select} id="job-app" describedBy=${d} value=${form.app} empty=${t('job_form.pick_app')}
              values=${editing && !operableApps.includes(form.app) ? [form.app, ...operableApps] : operableApps}
              disabled=${!writable} onChange=${set('app')} />`}<//>
          ${text('name')}
          ${text('handler', { required: true })}
          ${text('author')}
          ${text('params', { multiline: true, wide: true })}
        </fieldset>
        <fieldset>
          <legend>${t('job_form.scheduling')}</legend>
          ${choice('schedule_type')}
          ${form.schedule_type !== 'NONE' && text('schedule_conf', {
            hint: form.schedule_type === 'CRON' ? t('job_form.cron_hint') : t('job_form.seconds_hint'),
          })}
          ${text('time_zone', { list: 'time-zones' })}
          <datalist id="time-zones">
            ${(Intl.supportedValuesOf?.('timeZone') ?? ['UTC']).map((zone) => html`<option value=${zone} />`)}
          </datalist>
          <${SchedulePreview} form=${form} />
          ${choice('misfire_strategy')}
        </fieldset>
        <fieldset>
          <legend>${t('job_form.execution')}</legend>
          ${choice('route_strategy')}
          ${choice('block_strategy')}
          ${text('timeout_seconds', { type: 'number' })}
          ${choice('history')}
        </fieldset>
        <fieldset>
          <legend>${t('job_form.failures')}</legend>
          ${text('retry_count', { type: 'number' })}
          ${choice('retry_backoff')}
          ${form.retry_backoff !== 'NONE' && text('retry_backoff_seconds', { type: 'number' })}
          ${form.retry_backoff === 'EXPONENTIAL' && text('retry_backoff_cap_seconds', { type: 'number' })}
          ${text('alarm_emails', { hint: t('job_form.list_hint') })}
          ${text('alarm_webhook', { type: 'url' })}
        </fieldset>
        <fieldset>
          <legend>${t('job_form.children_and_script')}</legend>
          ${text('child_job_ids', { hint: t('job_form.list_hint') })}
          ${choice('child_trigger_mode')}
          ${choice('glue_type')}
          ${form.glue_type !== 'BEAN' && text('glue_source', { multiline: true, rows: 10, wide: true, code: true })}
          ${form.glue_type !== 'BEAN' && text('glue_remark')}
        </fieldset>
        ${error && !error.field && html`<${ErrorNote} error=${error} />`}
        ${writable && html`
          <div class="buttons">
            ${!editing && html`<label class="inline"><input type="checkbox" id="job-start" checked=${start}
              onChange=${(e) => setStart(e.target.checked)} /> ${t('job_form.start_now')}</label>`}
            <button type="submit" id="job-save" disabled=${saving}>${t('common.save')}</button>
            <a class="button secondary" href="#/jobs">${t('common.cancel')}</a>
          </div>`}
      </form>
    </section>
  `;
}

// The next five fires of the schedule being typed, in the job's zone (the viewer's on
// hover), or the parser's message naming the bad field.
function SchedulePreview({ form }) {
  const [preview, setPreview] = useState(null);
  const [error, setError] = useState(null);
  const { schedule_type: type, schedule_conf: conf, time_zone: zone } = form;
  useEffect(() => {
    if (type === 'NONE' || !conf.trim()) {
      setPreview(null);
      setError(null);
      return undefined;
    }
    let current = true;
    const timer = setTimeout(async () => {
      try {
        const answer = await get('/api/schedules/preview', {
          schedule_type: type, schedule_conf: conf, time_zone: zone || 'UTC', count: 5,
        });
        if (current) {
          setPreview(answer);
          setError(null);
        }
      } catch (failure) {
        if (current) {
          setPreview(null);
          setError(failure);
        }
      }
    }, 250);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [type, conf, zone]);
  return html`
    <div class="preview wide" id="schedule-preview" aria-live="polite">
      <strong>${t('job_form.next_fires', { zone: zone || 'UTC' })}</strong>
      ${error && html`<p class="field-error" role="alert" id="schedule-preview-error">${error.message}</p>`}
      ${preview && preview.message && html`<p class="field-error">${preview.message}</p>`}
      ${preview && html`<ol>${preview.fires_ms.map((ms) => html`
        <li title=${formatTime(ms)}>${formatTime(ms, zone || 'UTC')}</li>`)}</ol>`}
      ${!preview && !error && html`<p class="muted">${t('job_form.preview_empty')}</p>`}
    </div>
  `;
}
