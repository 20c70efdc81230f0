// Executors (XXL-JOB's 执行器管理): the registry per app, each executor with the partitions
// of the app's trigger topic it owns, its handlers, the jobs running and queued on it, its
// latest beat and whether it still takes triggers. Reloaded every 5 s in place: the table
// stays as it is while the next answer comes.

import { html, useRef, useState } from '../vendor/htm-preact-standalone.module.js';
import { get } from '../lib/api.js';
import { visibleApps } from '../lib/apps.js';
import { Time } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { t } from '../lib/i18n.js';
import { Badge, Field, PagedFooter, Select, useLoad, usePoll } from '../lib/ui.js';

const PAGE = 100;
const MAX_PAGE = 1000;
const POLL_MS = 5000;

// The first `count` executors (following the API's pages), and the cursor after them.
async function firstExecutors(app, count) {
  const items = [];
  let after;
  for (;;) {
    const page = await get('/api/executors', { app, after, limit: Math.min(count - items.length, MAX_PAGE) });
    items.push(...page.items);
    if (!page.next || items.length >= count) return { items, next: page.next ?? null };
    after = page.next;
  }
}

export function ExecutorsPage({ query }) {
  const [app, setApp] = useState(query.app ?? '');
  const [count, setCount] = useState(PAGE);
  const [state, setState] = useState({ items: [], next: null, loaded: false, error: null, at: null });
  const apps = useLoad(() => visibleApps(), []);
  const asked = useRef('');

  usePoll(async () => {
    const mine = JSON.stringify([app, count]);
    asked.current = mine;
    try {
      const page = await firstExecutors(app, count);
      if (asked.current !== mine) return;
      setState({ ...page, loaded: true, error: null, at: Date.now() });
    } catch (error) {
      if (asked.current !== mine) return;
      // Keep what is shown; say the reload failed.
      setState((previous) => ({ ...previous, loaded: true, error }));
    }
  }, POLL_MS, [app, count]);

  const chooseApp = (value) => {
    setApp(value);
    setCount(PAGE);
    setState({ items: [], next: null, loaded: false, error: null, at: null });
  };

  const paged = {
    items: state.items,
    next: state.next,
    loading: !state.loaded,
    error: state.error,
    more: () => setCount(count + PAGE),
  };
  const live = state.items.filter((executor) => executor.live).length;

  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('executors.title')} <${HelpLink} page="executors" /></h1>
      </header>
      <form class="filters" role="search" onSubmit=${(event) => event.preventDefault()}>
        <${Field} id="executors-app" label=${t('executors.app')}>${(d) => html`
          <${Select} id="executors-app" describedBy=${d} value=${app} empty=${t('common.any')}
            values=${(apps.value ?? []).map((one) => one.name)} onChange=${chooseApp} />`}<//>
      </form>
      <p class="muted" id="executors-summary">
        ${state.loaded ? t('executors.summary', { live, total: state.items.length }) : ''}
        ${' '}${t('executors.polling')}
        ${state.at && html` ${t('executors.updated')} <${Time} ms=${state.at} />`}
      </p>
      <div class="table-wrap">
        <table class="list" id="executors-table">
          <thead><tr>
            <th>${t('executors.id')}</th><th>${t('executors.app')}</th><th>${t('executors.host')}</th>
            <th>${t('executors.partitions')}</th><th>${t('executors.handlers')}</th>
            <th>${t('executors.running')}</th><th>${t('executors.queued')}</th>
            <th>${t('executors.last_beat')}</th><th>${t('executors.state')}</th>
          </tr></thead>
          <tbody>${state.items.map((executor) => html`<${ExecutorRow} key=${`${executor.app}/${executor.executor_id}`}
            executor=${executor} />`)}</tbody>
        </table>
      </div>
      <${PagedFooter} paged=${paged} />
    </section>
  `;
}

function JobLinks({ ids }) {
  if (!ids || ids.length === 0) return html`<span class="muted">—</span>`;
  return ids.map((id, index) => html`${index > 0 && ', '}<a href=${`#/jobs/${id}`}>${id}</a>`);
}

function ExecutorRow({ executor }) {
  const partitions = [...executor.owned_partitions].sort((a, b) => a - b);
  return html`
    <tr data-executor=${executor.executor_id} data-live=${executor.live ? 'true' : 'false'}>
      <td><code>${executor.executor_id}</code>
        ${executor.version && html`<br /><small class="muted">${executor.version}</small>`}</td>
      <td><a href=${`#/jobs?app=${encodeURIComponent(executor.app)}`}>${executor.app}</a></td>
      <td>${executor.host}</td>
      <td>${partitions.length ? partitions.join(', ') : html`<span class="muted">—</span>`}</td>
      <td>${executor.handlers.length
        ? executor.handlers.map((handler, index) => html`${index > 0 && ' '}<code>${handler}</code>`)
        : html`<span class="muted">—</span>`}</td>
      <td><${JobLinks} ids=${executor.running_jobs} /></td>
      <td><${JobLinks} ids=${executor.queued_jobs} /></td>
      <td><${Time} ms=${executor.last_beat_at_ms} /></td>
      <td>
        <${Badge} kind="state" value=${executor.live ? 'LIVE' : 'GONE'} />
        ${executor.state !== 'RUNNING' && html` <${Badge} kind="executor_state" value=${executor.state} />`}
      </td>
    </tr>
  `;
}
