// The morning glance (XXL-JOB's 运行报表): jobs, executors, today's runs, success and
// failure per day as a chart, and the latest failures.

import { html, useState } from '../vendor/htm-preact-standalone.module.js';
import { get } from '../lib/api.js';
import { HelpLink } from '../lib/help.js';
import { t } from '../lib/i18n.js';
import { ErrorNote, Select, useLoad } from '../lib/ui.js';
import { RunRow } from './runs.js';

const DAY_CHOICES = ['7', '14', '30', '90'];

export function DashboardPage() {
  const [days, setDays] = useState('7');
  const overview = useLoad(() => get('/api/overview', { days }), [days]);
  const value = overview.value;
  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('dashboard.title')} <${HelpLink} page="dashboard" /></h1>
        <button type="button" class="secondary" onClick=${overview.reload}>${t('common.refresh')}</button>
      </header>
      <${ErrorNote} error=${overview.error} />
      ${!value && !overview.error && html`<p class="muted">${t('common.loading')}</p>`}
      ${value && html`
        <div class="cards" id="dashboard-cards">
          <${Card} href="#/jobs" title=${t('dashboard.jobs')} value=${value.jobs.total}
            detail=${t('dashboard.jobs_detail', { running: value.jobs.running, stopped: value.jobs.stopped })} />
          <${Card} href="#/executors" title=${t('dashboard.executors')} value=${value.executors.live}
            detail=${t('dashboard.executors_detail', { apps: value.executors.apps.filter((app) => app.live > 0).length })} />
          <${Card} href="#/runs" title=${t('dashboard.runs_today')} value=${value.today.succeeded + value.today.failed + value.today.running}
            detail=${t('dashboard.today_detail', value.today)} />
        </div>
        <section class="panel chart-panel" aria-labelledby="chart-title">
          <header class="page-head">
            <h2 id="chart-title">${t('dashboard.chart_title')}</h2>
            <label for="chart-days">${t('dashboard.days')}</label>
            <${Select} id="chart-days" value=${days} values=${DAY_CHOICES} onChange=${setDays} />
          </header>
          <${DailyChart} days=${value.days} />
        </section>
        <section aria-labelledby="failures-title">
          <h2 id="failures-title">${t('dashboard.latest_failures')}</h2>
          ${value.recent_failures.length === 0
            ? html`<p class="muted empty">${t('dashboard.no_failures')}</p>`
            : html`<div class="table-wrap"><table class="list" id="failures-table">
                <thead><tr><th>${t('runs.log_id')}</th><th>${t('runs.job')}</th><th>${t('runs.app')}</th>
                  <th>${t('runs.trigger_type')}</th><th>${t('runs.scheduled')}</th><th>${t('runs.partition')}</th>
                  <th>${t('runs.outcome')}</th><th>${t('runs.duration')}</th><th>${t('runs.message')}</th></tr></thead>
                <tbody>${value.recent_failures.map((run) => html`<${RunRow} run=${run} />`)}</tbody>
              </table></div>`}
        </section>`}
    </section>
  `;
}

function Card({ href, title, value, detail }) {
  return html`<a class="card" href=${href}><span class="card-title">${title}</span>
    <strong class="card-value">${value}</strong><span class="muted">${detail}</span></a>`;
}

// Succeeded and failed runs per day as stacked bars (an SVG drawn here: two series and a
// few dozen bars need no chart library), with the same numbers in a table for screen
// readers and for copying.
function DailyChart({ days }) {
  const width = 720;
  const height = 220;
  const top = 10;
  const bottom = 28;
  const left = 40;
  const most = Math.max(1, ...days.map((day) => day.succeeded + day.failed));
  const slot = (width - left) / Math.max(1, days.length);
  const bar = Math.max(4, slot * 0.6);
  const scale = (count) => ((height - top - bottom) * count) / most;
  const labelEvery = Math.ceil(days.length / 10);
  return html`
    <figure class="chart">
      <svg viewBox=${`0 0 ${width} ${height}`} role="img" aria-labelledby="chart-title" id="daily-chart">
        <line x1=${left} y1=${height - bottom} x2=${width} y2=${height - bottom} class="axis" />
        <text x=${left - 6} y=${top + 10} class="tick" text-anchor="end">${most}</text>
        <text x=${left - 6} y=${height - bottom} class="tick" text-anchor="end">0</text>
        ${days.map((day, index) => {
          const x = left + index * slot + (slot - bar) / 2;
          const ok = scale(day.succeeded);
          const bad = scale(day.failed);
          const base = height - bottom;
          return html`<g>
            <title>${t('dashboard.bar', { day: day.day, succeeded: day.succeeded, failed: day.failed })}</title>
            <rect x=${x} y=${base - ok} width=${bar} height=${ok} class="bar-ok" />
            <rect x=${x} y=${base - ok - bad} width=${bar} height=${bad} class="bar-failed" />
            ${index % labelEvery === 0 && html`<text x=${x + bar / 2} y=${height - 10} class="tick" text-anchor="middle">${day.day.slice(5)}</text>`}
          </g>`;
        })}
      </svg>
      <figcaption class="legend">
        <span class="swatch bar-ok"></span>${t('dashboard.succeeded')}
        <span class="swatch bar-failed"></span>${t('dashboard.failed')}
      </figcaption>
      <table class="visually-hidden">
        <thead><tr><th>${t('dashboard.day')}</th><th>${t('dashboard.succeeded')}</th><th>${t('dashboard.failed')}</th></tr></thead>
        <tbody>${days.map((day) => html`<tr><td>${day.day}</td><td>${day.succeeded}</td><td>${day.failed}</td></tr>`)}</tbody>
      </table>
    </figure>
  `;
}
