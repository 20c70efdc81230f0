// The shadow report: an app's shadow runs (a candidate handler tried on a copy of the
// triggers) beside production's results, trigger by trigger, over a time range;
// disagreements first and highlighted, where the code or the message differ.

import { html, useEffect, useRef, useState } from '../vendor/htm-preact-standalone.module.js';
import { get } from '../lib/api.js';
import { visibleApps } from '../lib/apps.js';
import { Time, formatDuration, fromLocalInput, toLocalInput } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { t } from '../lib/i18n.js';
import { ErrorNote, Field, PagedFooter, Select, useLoad } from '../lib/ui.js';

const DAY_MS = 24 * 3600 * 1000;
const SHOWN = 100;

export function ShadowPage({ query }) {
  const apps = useLoad(() => visibleApps(), []);
  const [form, setForm] = useState({
    app: query.app ?? '',
    from: toLocalInput(query.from_ms ? Number(query.from_ms) : Date.now() - DAY_MS),
    to: query.to_ms ? toLocalInput(Number(query.to_ms)) : '',
  });
  const [errors, setErrors] = useState({});
  const [asked, setAsked] = useState(null);
  const [report, setReport] = useState({ value: null, error: null, loading: false });
  const [onlyDisagreements, setOnlyDisagreements] = useState(false);
  const [count, setCount] = useState(SHOWN);
  const generation = useRef(0);
  const set = (name) => (value) => setForm((previous) => ({ ...previous, [name]: value }));
  const names = (apps.value ?? []).map((app) => app.name);

  // The only app there is is the one to look at.
  useEffect(() => {
    if (!form.app && names.length === 1) setForm((previous) => ({ ...previous, app: names[0] }));
  }, [names.length]);

  const ask = (values) => {
    const found = {};
    const from_ms = fromLocalInput(values.from);
    const to_ms = values.to ? fromLocalInput(values.to) : Date.now();
    if (!values.app) found.app = t('shadow.app_required');
    if (from_ms === undefined) found.from = t('shadow.from_required');
    else if (to_ms === undefined || from_ms >= to_ms) found.to = t('shadow.range_invalid');
    setErrors(found);
    if (Object.keys(found).length) return;
    setCount(SHOWN);
    setAsked({ app: values.app, from_ms, to_ms });
  };

  // A link with the app already named shows its report at once.
  useEffect(() => {
    if (query.app) ask(form);
  }, []);

  useEffect(() => {
    if (!asked) return;
    const mine = ++generation.current;
    setReport((previous) => ({ ...previous, loading: true, error: null }));
    get('/api/shadow/report', asked).then(
      (value) => mine === generation.current && setReport({ value, error: null, loading: false }),
      (error) => mine === generation.current && setReport((previous) => ({ ...previous, error, loading: false })),
    );
  }, [asked]);

  const value = report.value;
  const rows = (value?.rows ?? []).filter((row) => !onlyDisagreements || row.disagrees);
  const paged = {
    items: rows.slice(0, count),
    next: rows.length > count ? String(count) : null,
    loading: report.loading && !value,
    error: null,
    more: () => setCount(count + SHOWN),
  };

  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('shadow.title')} <${HelpLink} page="shadow" /></h1>
      </header>
      <p class="muted">${t('shadow.intro')}</p>
      <form class="filters" role="search" id="shadow-filters" novalidate
        onSubmit=${(event) => { event.preventDefault(); ask(form); }}>
        <${Field} id="shadow-app" label=${t('shadow.app')} error=${errors.app}>${(d) => html`
          <${Select} id="shadow-app" describedBy=${d} value=${form.app} empty=${t('shadow.pick_app')}
            values=${names} onChange=${set('app')} />`}<//>
        <${Field} id="shadow-from" label=${t('shadow.from')} error=${errors.from}>${(d) => html`
          <input id="shadow-from" type="datetime-local" step="1" required aria-describedby=${d} value=${form.from}
            onInput=${(event) => set('from')(event.target.value)} />`}<//>
        <${Field} id="shadow-to" label=${t('shadow.to')} hint=${t('shadow.to_hint')} error=${errors.to}>${(d) => html`
          <input id="shadow-to" type="datetime-local" step="1" aria-describedby=${d} value=${form.to}
            onInput=${(event) => set('to')(event.target.value)} />`}<//>
        <button type="submit" id="shadow-submit">${t('shadow.show')}</button>
      </form>
      <${ErrorNote} error=${report.error} />
      ${report.loading && value && html`<p class="muted" aria-live="polite">${t('common.loading')}</p>`}
      ${value && html`
        <p id="shadow-summary" aria-live="polite">
          ${t('shadow.summary', { compared: value.compared, disagreements: value.disagreements, app: value.app })}
          ${' '}<${Time} ms=${value.from_ms} /> – <${Time} ms=${value.to_ms} />
        </p>
        ${value.truncated && html`<p class="notice" id="shadow-truncated">${t('shadow.truncated', { rows: value.compared })}</p>`}
        <div class="filters">
          <label class="inline"><input type="checkbox" id="shadow-only-disagreements" checked=${onlyDisagreements}
            onChange=${(event) => { setOnlyDisagreements(event.target.checked); setCount(SHOWN); }} />
            ${t('shadow.only_disagreements')}</label>
        </div>
        <div class="table-wrap">
          <table class="list" id="shadow-table">
            <thead>
              <tr>
                <th rowspan="2" scope="col">${t('shadow.trigger')}</th>
                <th rowspan="2" scope="col">${t('shadow.job')}</th>
                <th colspan="3" scope="colgroup">${t('shadow.production')}</th>
                <th colspan="3" scope="colgroup">${t('shadow.shadow')}</th>
                <th rowspan="2" scope="col">${t('shadow.executor')}</th>
                <th rowspan="2" scope="col">${t('shadow.started')}</th>
                <th rowspan="2" scope="col">${t('shadow.verdict')}</th>
              </tr>
              <tr>
                <th scope="col">${t('shadow.code')}</th><th scope="col">${t('shadow.message')}</th><th scope="col">${t('shadow.duration')}</th>
                <th scope="col">${t('shadow.code')}</th><th scope="col">${t('shadow.message')}</th><th scope="col">${t('shadow.duration')}</th>
              </tr>
            </thead>
            <tbody>${paged.items.map((row) => html`<${ShadowRow} key=${row.trigger_id} row=${row} />`)}</tbody>
          </table>
        </div>`}
      ${(value || report.loading) && html`<${PagedFooter} paged=${paged} />`}
    </section>
  `;
}

function ShadowRow({ row }) {
  const production = row.production;
  const shadow = row.shadow;
  const codeDiffers = !production || production.code !== shadow.code;
  const messageDiffers = !production || (production.message ?? '') !== (shadow.message ?? '');
  const diff = (differs, extra = '') => `${extra}${row.disagrees && differs ? ' shadow-diff' : ''}`.trim() || undefined;
  return html`
    <tr class=${row.disagrees ? 'shadow-disagrees' : undefined} data-trigger=${row.trigger_id}
      data-disagrees=${row.disagrees ? 'true' : 'false'}>
      <td><code>${row.trigger_id}</code></td>
      <td><a href=${`#/jobs/${row.job_id}`}>${row.job_id}</a></td>
      ${production
        ? html`
          <td class=${diff(codeDiffers)}>${production.code}</td>
          <td class=${diff(messageDiffers, 'message')}>${production.message ?? ''}</td>
          <td>${formatDuration(production.duration_ms)}</td>`
        : html`<td colspan="3" class=${diff(true, 'muted')}>${t('shadow.no_production_result')}</td>`}
      <td class=${diff(codeDiffers)}>${shadow.code}</td>
      <td class=${diff(messageDiffers, 'message')}>${shadow.message ?? ''}</td>
      <td>${formatDuration(shadow.duration_ms)}</td>
      <td><code>${row.shadow_executor_id}</code></td>
      <td><${Time} ms=${row.shadow_started_at_ms} /></td>
      <td><span class=${`badge ${row.disagrees ? 'state-gone' : 'state-live'}`}>
        ${row.disagrees ? t('shadow.differs') : t('shadow.agrees')}</span></td>
    </tr>
  `;
}
