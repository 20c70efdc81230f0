// Runs: every run the user may see, filtered by app, job, outcome and time, newest first.

import { html, useState } from '../vendor/htm-preact-standalone.module.js';
import { visibleApps } from '../lib/apps.js';
import { Time, formatDuration, fromLocalInput, toLocalInput } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { label, t } from '../lib/i18n.js';
import { Badge, Field, PagedFooter, Select, runOutcome, useLoad, usePaged } from '../lib/ui.js';

const OUTCOMES = ['SUCCEEDED', 'FAILED', 'RUNNING'];

export function RunsPage({ query }) {
  const [filters, setFilters] = useState({
    app: query.app ?? '',
    job: query.job ?? '',
    outcome: query.outcome ?? '',
    from: query.from_ms ? toLocalInput(Number(query.from_ms)) : '',
    to: query.to_ms ? toLocalInput(Number(query.to_ms)) : '',
  });
  const asQuery = (values) => ({
    app: values.app,
    job: values.job,
    outcome: values.outcome,
    from_ms: fromLocalInput(values.from),
    to_ms: fromLocalInput(values.to),
  });
  const [applied, setApplied] = useState(asQuery(filters));
  const apps = useLoad(() => visibleApps(), []);
  const runs = usePaged('/api/runs', applied);
  const set = (name) => (value) => setFilters((previous) => ({ ...previous, [name]: value }));
  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('runs.title')} <${HelpLink} page="runs" /></h1>
        <button type="button" class="secondary" id="refresh-runs" onClick=${runs.reload}>${t('common.refresh')}</button>
      </header>
      <form class="filters" role="search" onSubmit=${(event) => { event.preventDefault(); setApplied(asQuery(filters)); }}>
        <${Field} id="runs-app" label=${t('runs.app')}>${(d) => html`
          <${Select} id="runs-app" describedBy=${d} value=${filters.app} empty=${t('common.any')}
            values=${(apps.value ?? []).map((app) => app.name)} onChange=${set('app')} />`}<//>
        <${Field} id="runs-job" label=${t('runs.job')}>${() => html`
          <input id="runs-job" inputmode="numeric" value=${filters.job} onInput=${(e) => set('job')(e.target.value)} />`}<//>
        <${Field} id="runs-outcome" label=${t('runs.outcome')}>${(d) => html`
          <${Select} id="runs-outcome" describedBy=${d} value=${filters.outcome} empty=${t('common.any')}
            values=${OUTCOMES} kind="outcome" onChange=${set('outcome')} />`}<//>
        <${Field} id="runs-from" label=${t('runs.from')}>${() => html`
          <input id="runs-from" type="datetime-local" step="1" value=${filters.from} onInput=${(e) => set('from')(e.target.value)} />`}<//>
        <${Field} id="runs-to" label=${t('runs.to')}>${() => html`
          <input id="runs-to" type="datetime-local" step="1" value=${filters.to} onInput=${(e) => set('to')(e.target.value)} />`}<//>
        <button type="submit" id="apply-run-filters">${t('common.filter')}</button>
      </form>
      <div class="table-wrap">
        <table class="list" id="runs-table">
          <thead><tr>
            <th>${t('runs.log_id')}</th><th>${t('runs.job')}</th><th>${t('runs.app')}</th>
            <th>${t('runs.trigger_type')}</th><th>${t('runs.scheduled')}</th><th>${t('runs.partition')}</th>
            <th>${t('runs.outcome')}</th><th>${t('runs.duration')}</th><th>${t('runs.message')}</th>
          </tr></thead>
          <tbody>${runs.items.map((run) => html`<${RunRow} run=${run} />`)}</tbody>
        </table>
      </div>
      <${PagedFooter} paged=${runs} />
    </section>
  `;
}

export function RunRow({ run }) {
  const took = run.started_at_ms && run.handle_at_ms ? run.handle_at_ms - run.started_at_ms : null;
  return html`
    <tr data-run=${run.log_id} data-outcome=${runOutcome(run)}>
      <td><a href=${`#/runs/${run.log_id}`}>${run.log_id}</a></td>
      <td><a href=${`#/jobs/${run.job_id}`}>${run.job_description || run.job_id}</a></td>
      <td>${run.app ?? ''}</td>
      <td>${label('trigger_type', run.trigger_type)}${run.attempt > 0 && html` <span class="muted">#${run.attempt}</span>`}</td>
      <td><${Time} ms=${run.scheduled_at_ms} zone=${run.time_zone} /></td>
      <td>${run.partition ?? ''}</td>
      <td><${Badge} kind="outcome" value=${runOutcome(run)} /></td>
      <td>${formatDuration(took)}</td>
      <td class="message">${run.handle_msg ?? ''}</td>
    </tr>
  `;
}
