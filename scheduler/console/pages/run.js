// One run: its attempts, retries, children, executor, partition and trigger id, its log
// following live while the run goes, and kill.

import { html, useEffect, useRef, useState } from '../vendor/htm-preact-standalone.module.js';
import { get, post } from '../lib/api.js';
import { Time, formatDuration } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { label, t } from '../lib/i18n.js';
import { can } from '../lib/session.js';
import { Badge, ConfirmButton, ErrorNote, runOutcome, useLoad, useNotice, usePoll } from '../lib/ui.js';
import { RunRow } from './runs.js';

const FOLLOW_INTERVAL_MS = 1000;

export function RunPage({ logId }) {
  const detail = useLoad(() => get(`/api/runs/${logId}`), [logId]);
  const [notice, setNotice] = useNotice();
  const [error, setError] = useState(null);
  const run = detail.value;
  const finished = run && (run.state === 'FINISHED' || run.state === 'CANCELLED');
  // While the run goes, its state is read again now and then (the log has its own poll).
  useEffect(() => {
    if (!run || finished) return undefined;
    const timer = setTimeout(detail.reload, 3000);
    return () => clearTimeout(timer);
  }, [detail.value]);

  if (detail.error) return html`<section class="page"><${ErrorNote} error=${detail.error} /></section>`;
  if (!run) return html`<section class="page"><p class="muted">${t('common.loading')}</p></section>`;
  const kill = async () => {
    setError(null);
    try {
      await post(`/api/runs/${logId}/kill`);
      setNotice(t('run.kill_sent'));
      detail.reload();
    } catch (failure) {
      setError(failure);
    }
  };
  const took = run.started_at_ms && run.handle_at_ms ? run.handle_at_ms - run.started_at_ms : null;
  const facts = [
    ['run.job', html`<a href=${`#/jobs/${run.job_id}`}>${run.job_description || run.job_id}</a>`],
    ['run.app', run.app],
    ['run.handler', run.handler],
    ['run.trigger_id', html`<code>${run.trigger_id}</code>`],
    ['run.trigger_type', label('trigger_type', run.trigger_type)],
    ['run.attempt', run.attempt],
    ['run.shard', `${run.shard_index + 1} / ${run.shard_total}`],
    ['run.params', html`<code class="wrap">${run.params}</code>`],
    ['run.scheduled', html`<${Time} ms=${run.scheduled_at_ms} zone=${run.time_zone} />`],
    ['run.dispatched', html`<${Time} ms=${run.dispatched_at_ms} zone=${run.time_zone} />`],
    ['run.partition', run.partition ?? '—'],
    ['run.executor', run.executor_id ?? '—'],
    ['run.started', html`<${Time} ms=${run.started_at_ms} zone=${run.time_zone} />`],
    ['run.finished', html`<${Time} ms=${run.handle_at_ms} zone=${run.time_zone} />`],
    ['run.duration', formatDuration(took) || '—'],
    ['run.code', run.handle_code ?? '—'],
    ['run.message', run.handle_msg ?? '—'],
  ];
  if (run.replay_of) facts.push(['run.replay_of', html`<code>${run.replay_of}</code>`]);
  if (run.operation_id) facts.push(['run.operation', html`<a href=${`#/replays?id=${run.operation_id}`}>${run.operation_id}</a>`]);
  const childJobs = detail.value.child_job_ids ?? [];
  if (childJobs.length) {
    facts.push(['run.child_jobs', childJobs.map((id) => html`<a class="chip" href=${`#/jobs/${id}`}>${id}</a> `)]);
  }
  const attempts = detail.value.attempts ?? [];
  const children = detail.value.children ?? [];
  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('run.title', { id: run.log_id })} <${Badge} kind="outcome" value=${runOutcome(run)} /> <${HelpLink} page="run" /></h1>
        ${!finished && can(run.app, 'OPERATE') && html`
          <${ConfirmButton} id="kill-run" danger label=${t('run.kill')} question=${t('run.kill_question')} onConfirm=${kill} />`}
      </header>
      ${notice}
      <${ErrorNote} error=${error} />
      <dl class="facts">${facts.map(([key, value]) => html`<dt>${t(key)}</dt><dd>${value}</dd>`)}</dl>
      ${attempts.length > 1 && html`
        <h2>${t('run.attempts')}</h2>
        <div class="table-wrap"><table class="list" id="attempts-table">
          <thead><tr><th>${t('runs.log_id')}</th><th>${t('runs.job')}</th><th>${t('runs.app')}</th>
            <th>${t('runs.trigger_type')}</th><th>${t('runs.scheduled')}</th><th>${t('runs.partition')}</th>
            <th>${t('runs.outcome')}</th><th>${t('runs.duration')}</th><th>${t('runs.message')}</th></tr></thead>
          <tbody>${attempts.map((attempt) => html`<${RunRow} run=${attempt} />`)}</tbody>
        </table></div>`}
      ${children.length > 0 && html`
        <h2>${t('run.children')}</h2>
        <div class="table-wrap"><table class="list" id="children-table">
          <thead><tr><th>${t('runs.log_id')}</th><th>${t('runs.job')}</th><th>${t('runs.app')}</th>
            <th>${t('runs.trigger_type')}</th><th>${t('runs.scheduled')}</th><th>${t('runs.partition')}</th>
            <th>${t('runs.outcome')}</th><th>${t('runs.duration')}</th><th>${t('runs.message')}</th></tr></thead>
          <tbody>${children.map((child) => html`<${RunRow} run=${child} />`)}</tbody>
        </table></div>`}
      <h2>${t('run.log')}</h2>
      <${RunLog} logId=${run.log_id} />
    </section>
  `;
}

// The run's log, read from the line after the last one shown, once a second until the run
// has finished and two reads in a row brought nothing new (lines and results are stored by
// separate consumers, so the last lines may land just after the result). Scrolls along
// while the reader is at the bottom. A trigger that ran again (its first run handed back, or
// its executor stopped) shows its later run: the lines shown so far are replaced by it.
function RunLog({ logId }) {
  const [lines, setLines] = useState([]);
  const [following, setFollowing] = useState(true);
  const [replaced, setReplaced] = useState(false);
  const [error, setError] = useState(null);
  const next = useRef(1);
  const runShown = useRef(null);
  const quietAfterEnd = useRef(0);
  const box = useRef(null);
  usePoll(async () => {
    try {
      let stretch = await get(`/api/runs/${logId}/log`, { from_line: next.current });
      if (runShown.current !== null && stretch.run_started_at_ms !== runShown.current) {
        next.current = 1;
        setLines([]);
        stretch = await get(`/api/runs/${logId}/log`, { from_line: 1 });
      }
      if (stretch.run_started_at_ms !== null) runShown.current = stretch.run_started_at_ms;
      setReplaced(stretch.earlier_runs > 0);
      setError(null);
      if (stretch.lines.length > 0) {
        next.current = stretch.next_line;
        const atBottom = box.current && box.current.scrollHeight - box.current.scrollTop - box.current.clientHeight < 24;
        setLines((shown) => [...shown, ...stretch.lines]);
        if (atBottom) requestAnimationFrame(() => { box.current.scrollTop = box.current.scrollHeight; });
        quietAfterEnd.current = 0;
      } else if (stretch.finished && ++quietAfterEnd.current >= 2) {
        setFollowing(false);
      }
    } catch (failure) {
      setError(failure);
    }
  }, FOLLOW_INTERVAL_MS, [logId], following);
  return html`
    <div class="log-head">
      <span class=${following ? 'live' : 'muted'} id="log-state">${following ? t('run.log_following') : t('run.log_done')}</span>
      <span class="muted">${t('run.log_lines', { n: lines.length })}</span>
    </div>
    ${replaced ? html`<p class="muted" id="log-replaced">${t('run.log_replaced')}</p>` : null}
    <${ErrorNote} error=${error} />
    <pre class="log" id="run-log" ref=${box} tabindex="0" aria-live="off">${lines.length ? lines.join('\n') : t('run.log_empty')}</pre>
  `;
}
