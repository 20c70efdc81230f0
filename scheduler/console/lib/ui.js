// Widgets every page uses: paged lists that load without blocking, fields with their error
// beside them, confirmations, badges, polling.

import { html, useCallback, useEffect, useRef, useState } from '../vendor/htm-preact-standalone.module.js';
import { get } from './api.js';
import { label, t } from './i18n.js';

// A page of `path` (the API's {items, next}) and the pages after it, loaded on demand.
// `query` changes start again from the first page; a stale answer is dropped.
export function usePaged(path, query) {
  const [state, setState] = useState({ items: [], next: null, loading: true, error: null });
  const generation = useRef(0);
  const key = JSON.stringify([path, query]);
  const load = useCallback(
    async (after, append) => {
      const mine = ++generation.current;
      setState((previous) => ({ ...previous, loading: true, error: null }));
      try {
        const page = await get(path, { ...query, after });
        if (mine !== generation.current) return;
        setState((previous) => ({
          items: append ? [...previous.items, ...page.items] : page.items,
          next: page.next ?? null,
          loading: false,
          error: null,
        }));
      } catch (error) {
        if (mine !== generation.current) return;
        setState((previous) => ({ ...previous, loading: false, error }));
      }
    },
    [key],
  );
  useEffect(() => {
    load(undefined, false);
  }, [key]);
  return {
    ...state,
    more: () => state.next && load(state.next, true),
    reload: () => load(undefined, false),
  };
}

// The rows of a paged list, with its loading, empty and error states and "more".
export function PagedFooter({ paged }) {
  return html`
    ${paged.error && html`<${ErrorNote} error=${paged.error} />`}
    ${paged.loading && html`<p class="muted" aria-live="polite">${t('common.loading')}</p>`}
    ${!paged.loading && !paged.error && paged.items.length === 0 &&
    html`<p class="muted empty">${t('common.empty')}</p>`}
    ${paged.next && !paged.loading &&
    html`<button type="button" class="secondary more" onClick=${paged.more}>${t('common.more')}</button>`}
  `;
}

// Runs `task` now and every `intervalMs` while the component is shown (and `active`).
export function usePoll(task, intervalMs, deps, active = true) {
  useEffect(() => {
    if (!active) return undefined;
    let stopped = false;
    let timer = null;
    const tick = async () => {
      try {
        await task();
      } finally {
        if (!stopped) timer = setTimeout(tick, intervalMs);
      }
    };
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, active]);
}

// Loads `load()` once per `deps`: {value, error, loading, reload}.
export function useLoad(load, deps) {
  const [state, setState] = useState({ value: null, error: null, loading: true });
  const run = async () => {
    setState((previous) => ({ ...previous, loading: true, error: null }));
    try {
      setState({ value: await load(), error: null, loading: false });
    } catch (error) {
      setState({ value: null, error, loading: false });
    }
  };
  useEffect(() => {
    run();
  }, deps);
  return { ...state, reload: run };
}

export function ErrorNote({ error }) {
  if (!error) return null;
  let message = error.message ?? String(error);
  if (error.status === 0) message = t('common.unreachable');
  if (error.status === 503) message = t('common.busy');
  if (error.status === 403) message = t('common.forbidden', { reason: error.message });
  return html`<p class="error" role="alert">${message}</p>`;
}

// A labelled control with its hint and its error right beside it.
export function Field({ id, label: text, error, hint, children, wide }) {
  const described = [hint ? `${id}-hint` : null, error ? `${id}-error` : null].filter(Boolean).join(' ');
  return html`
    <div class=${`field${error ? ' invalid' : ''}${wide ? ' wide' : ''}`} data-field=${id}>
      <label for=${id}>${text}</label>
      ${children(described || undefined)}
      ${hint && html`<small id=${`${id}-hint`} class="hint">${hint}</small>`}
      ${error && html`<small id=${`${id}-error`} class="field-error" role="alert">${error}</small>`}
    </div>
  `;
}

// A button that asks first, in place (keyboard reachable, Escape cancels).
export function ConfirmButton({ label: text, question, onConfirm, danger, id }) {
  const [asking, setAsking] = useState(false);
  const confirmRef = useRef(null);
  useEffect(() => {
    if (asking) confirmRef.current?.focus();
  }, [asking]);
  if (!asking) {
    return html`<button type="button" id=${id} class=${danger ? 'danger' : 'secondary'}
      onClick=${() => setAsking(true)}>${text}</button>`;
  }
  const done = async () => {
    setAsking(false);
    await onConfirm();
  };
  return html`
    <span class="confirm" role="alertdialog" aria-label=${question}
      onKeyDown=${(event) => event.key === 'Escape' && setAsking(false)}>
      <span>${question}</span>
      <button type="button" ref=${confirmRef} class=${danger ? 'danger' : ''} data-confirm="yes"
        onClick=${done}>${t('common.confirm')}</button>
      <button type="button" class="secondary" onClick=${() => setAsking(false)}>${t('common.cancel')}</button>
    </span>
  `;
}

// An enumeration value as a coloured badge (run outcomes, job and executor states).
export function Badge({ kind, value }) {
  if (!value) return null;
  return html`<span class=${`badge ${kind}-${String(value).toLowerCase()}`}>${label(kind, value)}</span>`;
}

// What a finished run came to, from its state and code.
export function runOutcome(run) {
  if (run.state === 'CANCELLED') return 'CANCELLED';
  if (run.state !== 'FINISHED') return run.state;
  if (run.handle_code === 200) return 'SUCCEEDED';
  if (run.handle_code === 502) return 'TIMED_OUT';
  return 'FAILED';
}

// A <select> of `values` with their labels; `empty` adds a first "any" option.
export function Select({ id, value, values, kind, empty, onChange, describedBy, disabled }) {
  return html`
    <select id=${id} value=${value ?? ''} aria-describedby=${describedBy} disabled=${disabled}
      onChange=${(event) => onChange(event.target.value)}>
      ${empty && html`<option value="">${empty}</option>`}
      ${values.map((option) => html`<option value=${option}>${kind ? label(kind, option) : option}</option>`)}
    </select>
  `;
}

// A notice that goes away after a while (saved, triggered, killed).
export function useNotice() {
  const [notice, setNotice] = useState(null);
  useEffect(() => {
    if (!notice) return undefined;
    const timer = setTimeout(() => setNotice(null), 6000);
    return () => clearTimeout(timer);
  }, [notice]);
  const view = notice && html`<p class="notice" role="status">${notice}</p>`;
  return [view, setNotice];
}
