// The audit trail (XXL-JOB's 操作日志): every write through the API, who made it, when, on
// what and with what answer, newest first; filtered by app, user, target and time. Admins
// see every entry, members the entries of the apps they may view.

import { html, useState } from '../vendor/htm-preact-standalone.module.js';
import { visibleApps } from '../lib/apps.js';
import { Time, fromLocalInput, toLocalInput } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { t } from '../lib/i18n.js';
import { Field, PagedFooter, Select, useLoad, usePaged } from '../lib/ui.js';

function asQuery(values) {
  return {
    app: values.app,
    user: values.user.trim(),
    target: values.target.trim(),
    from_ms: fromLocalInput(values.from),
    to_ms: fromLocalInput(values.to),
  };
}

export function AuditPage({ query }) {
  const [filters, setFilters] = useState({
    app: query.app ?? '',
    user: query.user ?? '',
    target: query.target ?? '',
    from: query.from_ms ? toLocalInput(Number(query.from_ms)) : '',
    to: query.to_ms ? toLocalInput(Number(query.to_ms)) : '',
  });
  const [applied, setApplied] = useState(asQuery(filters));
  const apps = useLoad(() => visibleApps(), []);
  const entries = usePaged('/api/audit', applied);
  const set = (name) => (value) => setFilters((previous) => ({ ...previous, [name]: value }));
  const text = (name) => (event) => set(name)(event.target.value);
  const [rangeError, setRangeError] = useState(null);
  const apply = (event) => {
    event.preventDefault();
    const next = asQuery(filters);
    if (next.from_ms !== undefined && next.to_ms !== undefined && next.from_ms >= next.to_ms) {
      setRangeError(t('audit.range_invalid'));
      return;
    }
    setRangeError(null);
    setApplied(next);
  };

  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('audit.title')} <${HelpLink} page="audit" /></h1>
        <button type="button" class="secondary" id="refresh-audit" onClick=${entries.reload}>${t('common.refresh')}</button>
      </header>
      <form class="filters" role="search" id="audit-filters" onSubmit=${apply}>
        <${Field} id="audit-app" label=${t('audit.app')}>${(d) => html`
          <${Select} id="audit-app" describedBy=${d} value=${filters.app} empty=${t('common.any')}
            values=${(apps.value ?? []).map((app) => app.name)} onChange=${set('app')} />`}<//>
        <${Field} id="audit-user" label=${t('audit.user')}>${(d) => html`
          <input id="audit-user" autocomplete="off" aria-describedby=${d} value=${filters.user} onInput=${text('user')} />`}<//>
        <${Field} id="audit-target" label=${t('audit.target')} hint=${t('audit.target_hint')}>${(d) => html`
          <input id="audit-target" autocomplete="off" spellcheck=${false} aria-describedby=${d}
            placeholder=${t('audit.target_placeholder')} value=${filters.target} onInput=${text('target')} />`}<//>
        <${Field} id="audit-from" label=${t('audit.from')}>${(d) => html`
          <input id="audit-from" type="datetime-local" step="1" aria-describedby=${d} value=${filters.from}
            onInput=${text('from')} />`}<//>
        <${Field} id="audit-to" label=${t('audit.to')} error=${rangeError}>${(d) => html`
          <input id="audit-to" type="datetime-local" step="1" aria-describedby=${d} value=${filters.to}
            onInput=${text('to')} />`}<//>
        <button type="submit" id="apply-audit-filters">${t('common.filter')}</button>
      </form>
      <div class="table-wrap">
        <table class="list" id="audit-table">
          <thead><tr>
            <th>${t('audit.at')}</th><th>${t('audit.user')}</th><th>${t('audit.action')}</th>
            <th>${t('audit.target')}</th><th>${t('audit.app')}</th><th>${t('audit.status')}</th>
            <th>${t('audit.details')}</th>
          </tr></thead>
          <tbody>${entries.items.map((entry) => html`<${AuditRow} key=${entry.id} entry=${entry} />`)}</tbody>
        </table>
      </div>
      <${PagedFooter} paged=${entries} />
    </section>
  `;
}

function AuditRow({ entry }) {
  const ok = entry.status < 400;
  return html`
    <tr data-audit=${entry.id} data-status=${entry.status}>
      <td><${Time} ms=${entry.at_ms} /></td>
      <td>${entry.user_name || html`<span class="muted">—</span>`}</td>
      <td><code>${entry.action}</code></td>
      <td><code>${entry.target}</code></td>
      <td>${entry.app ?? html`<span class="muted">—</span>`}</td>
      <td><span class=${`badge ${ok ? 'outcome-succeeded' : 'outcome-failed'}`}
        title=${ok ? t('audit.status_ok') : t('audit.status_refused')}>${entry.status}</span></td>
      <td class="message">${entry.details === null || entry.details === undefined
        ? html`<span class="muted">—</span>`
        : html`<details><summary>${t('audit.show_details')}</summary>
            <pre class="code wrap">${JSON.stringify(entry.details, null, 2)}</pre></details>`}</td>
    </tr>
  `;
}
