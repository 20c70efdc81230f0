// Jobs: the list with its filters (app, status, handler, author, text), and per job what an
// operator does from it: edit, run once, start, stop, copy, delete, script, runs.

import { html, useState } from '../vendor/htm-preact-standalone.module.js';
import { del, post } from '../lib/api.js';
import { visibleApps } from '../lib/apps.js';
import { Time } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { label, t } from '../lib/i18n.js';
import { can, canOperateSomewhere } from '../lib/session.js';
import { Badge, ConfirmButton, ErrorNote, Field, PagedFooter, Select, useLoad, useNotice, usePaged } from '../lib/ui.js';

const STATUSES = ['RUNNING', 'STOPPED'];

export function JobsPage({ query }) {
  const [filters, setFilters] = useState({
    app: query.app ?? '',
    status: query.status ?? '',
    handler: '',
    author: '',
    q: '',
  });
  const [applied, setApplied] = useState(filters);
  const apps = useLoad(() => visibleApps(), []);
  const jobs = usePaged('/api/jobs', applied);
  const [notice, setNotice] = useNotice();
  const [error, setError] = useState(null);
  const [triggering, setTriggering] = useState(null);
  const set = (name) => (value) => setFilters((previous) => ({ ...previous, [name]: value }));

  const act = async (work, message) => {
    setError(null);
    try {
      await work();
      setNotice(message);
      jobs.reload();
    } catch (failure) {
      setError(failure);
    }
  };

  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('jobs.title')} <${HelpLink} page="jobs" /></h1>
        ${canOperateSomewhere() && html`<a class="button" id="new-job" href="#/jobs/new">${t('jobs.new')}</a>`}
      </header>
      <form class="filters" role="search" onSubmit=${(event) => { event.preventDefault(); setApplied(filters); }}>
        <${Field} id="filter-app" label=${t('jobs.app')}>${(d) => html`
          <${Select} id="filter-app" describedBy=${d} value=${filters.app} empty=${t('common.any')}
            values=${(apps.value ?? []).map((app) => app.name)} onChange=${set('app')} />`}<//>
        <${Field} id="filter-status" label=${t('jobs.status')}>${(d) => html`
          <${Select} id="filter-status" describedBy=${d} value=${filters.status} empty=${t('common.any')}
            values=${STATUSES} kind="job_status" onChange=${set('status')} />`}<//>
        <${Field} id="filter-handler" label=${t('jobs.handler')}>${() => html`
          <input id="filter-handler" value=${filters.handler} onInput=${(e) => set('handler')(e.target.value)} />`}<//>
        <${Field} id="filter-author" label=${t('jobs.author')}>${() => html`
          <input id="filter-author" value=${filters.author} onInput=${(e) => set('author')(e.target.value)} />`}<//>
        <${Field} id="filter-q" label=${t('jobs.search')}>${() => html`
          <input id="filter-q" type="search" value=${filters.q} placeholder=${t('jobs.search_hint')}
            onInput=${(e) => set('q')(e.target.value)} />`}<//>
        <button type="submit" id="apply-filters">${t('common.filter')}</button>
      </form>
      ${notice}
      <${ErrorNote} error=${error} />
      ${triggering && html`<${TriggerPanel} job=${triggering} onClose=${() => setTriggering(null)}
        onDone=${(answer) => { setTriggering(null); setNotice(t('jobs.triggered', { log: answer.log_id })); }} />`}
      <div class="table-wrap">
        <table class="list" id="jobs-table">
          <thead><tr>
            <th>${t('jobs.id')}</th><th>${t('jobs.name')}</th><th>${t('jobs.app')}</th>
            <th>${t('jobs.schedule')}</th><th>${t('jobs.handler')}</th><th>${t('jobs.author')}</th>
            <th>${t('jobs.status')}</th><th>${t('jobs.next_fire')}</th><th>${t('common.actions')}</th>
          </tr></thead>
          <tbody>
            ${jobs.items.map((job) => html`<${JobRow} job=${job} act=${act} onTrigger=${setTriggering} />`)}
          </tbody>
        </table>
      </div>
      <${PagedFooter} paged=${jobs} />
    </section>
  `;
}

function JobRow({ job, act, onTrigger }) {
  const operate = can(job.app, 'OPERATE');
  const running = job.status === 'RUNNING';
  const schedule = job.schedule_type === 'NONE'
    ? label('schedule_type', 'NONE')
    : `${label('schedule_type', job.schedule_type)}: ${job.schedule_conf}`;
  return html`
    <tr data-job=${job.id}>
      <td>${job.id}</td>
      <td><a href=${`#/jobs/${job.id}`}>${job.name}</a></td>
      <td>${job.app}</td>
      <td><code>${schedule}</code></td>
      <td>${job.handler}${job.glue_type !== 'BEAN' && html` <span class="badge glue">${label('glue_type', job.glue_type)}</span>`}</td>
      <td>${job.author}</td>
      <td><${Badge} kind="job_status" value=${job.status} /></td>
      <td><${Time} ms=${running ? job.next_fire_ms : null} zone=${job.time_zone} /></td>
      <td class="actions">
        <a href=${`#/runs?job=${job.id}`}>${t('jobs.runs')}</a>
        ${job.glue_type !== 'BEAN' && html`<a href=${`#/jobs/${job.id}/script`}>${t('jobs.script')}</a>`}
        ${operate && html`
          <button type="button" class="secondary" data-action="trigger" onClick=${() => onTrigger(job)}>${t('jobs.run_once')}</button>
          ${running
            ? html`<button type="button" class="secondary" data-action="stop"
                onClick=${() => act(() => post(`/api/jobs/${job.id}/stop`), t('jobs.stopped', { id: job.id }))}>${t('jobs.stop')}</button>`
            : html`<button type="button" data-action="start"
                onClick=${() => act(() => post(`/api/jobs/${job.id}/start`), t('jobs.started', { id: job.id }))}>${t('jobs.start')}</button>`}
          <a href=${`#/jobs/${job.id}/copy`} data-action="copy">${t('jobs.copy')}</a>
          <${ConfirmButton} danger label=${t('jobs.delete')} question=${t('jobs.delete_question', { name: job.name })}
            onConfirm=${() => act(() => del(`/api/jobs/${job.id}`), t('jobs.deleted', { id: job.id }))} />`}
      </td>
    </tr>
  `;
}

// Run once: other params for this run, and which partitions it may go to.
export function TriggerPanel({ job, onClose, onDone }) {
  const [params, setParams] = useState(job.params);
  const [partitions, setPartitions] = useState('');
  const [error, setError] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    const named = partitions.split(/[\s,]+/).filter(Boolean).map(Number);
    if (named.some((partition) => !Number.isInteger(partition) || partition < 0)) {
      setError({ field: 'partitions', message: t('jobs.partitions_invalid') });
      return;
    }
    try {
      const body = { params, partitions: named.length ? named : undefined };
      onDone(await post(`/api/jobs/${job.id}/trigger`, body));
    } catch (failure) {
      setError(failure);
    }
  };
  const fieldError = error?.field === 'partitions' || /partition/.test(error?.message ?? '') ? error.message : null;
  return html`
    <form class="panel" id="trigger-panel" onSubmit=${submit} aria-labelledby="trigger-title"
      onKeyDown=${(event) => event.key === 'Escape' && onClose()}>
      <h2 id="trigger-title">${t('jobs.run_once_title', { name: job.name })}</h2>
      <${Field} id="trigger-params" label=${t('jobs.params')} wide>${(d) => html`
        <textarea id="trigger-params" rows="3" aria-describedby=${d} value=${params}
          onInput=${(e) => setParams(e.target.value)}></textarea>`}<//>
      <${Field} id="trigger-partitions" label=${t('jobs.partitions')} hint=${t('jobs.partitions_hint')} error=${fieldError}>${(d) => html`
        <input id="trigger-partitions" aria-describedby=${d} value=${partitions}
          onInput=${(e) => setPartitions(e.target.value)} />`}<//>
      ${!fieldError && html`<${ErrorNote} error=${error} />`}
      <div class="buttons">
        <button type="submit" id="trigger-submit">${t('jobs.run_once')}</button>
        <button type="button" class="secondary" onClick=${onClose}>${t('common.cancel')}</button>
      </div>
    </form>
  `;
}
