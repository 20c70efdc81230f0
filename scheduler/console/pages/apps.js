// Apps (XXL-JOB's executor groups): each with its trigger topic's partition count (the most
// executors that share its triggers), title and creation time. Admins create them: an app is
// a topic and a consumer group, the cluster's to give out (api/apps.rs).

import { html, useState } from '../vendor/htm-preact-standalone.module.js';
import { post } from '../lib/api.js';
import { visibleApps } from '../lib/apps.js';
import { Time } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { label, t } from '../lib/i18n.js';
import { currentUser, isAdmin } from '../lib/session.js';
import { ErrorNote, Field, PagedFooter, useNotice, usePaged } from '../lib/ui.js';

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_PARTITIONS = 1024;

export function AppsPage() {
  const apps = usePaged('/api/apps', {});
  const [creating, setCreating] = useState(false);
  const [notice, setNotice] = useNotice();
  const admin = isAdmin();

  const created = (app) => {
    setCreating(false);
    setNotice(t('apps.created', { name: app.name, partitions: app.partitions }));
    visibleApps(true).catch(() => {});
    apps.reload();
  };

  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('apps.title')} <${HelpLink} page="apps" /></h1>
        ${admin && !creating && html`<button type="button" id="new-app" onClick=${() => setCreating(true)}>${t('apps.new')}</button>`}
      </header>
      ${notice}
      ${admin && creating && html`<${NewAppForm} onCreated=${created} onClose=${() => setCreating(false)} />`}
      <div class="table-wrap">
        <table class="list" id="apps-table">
          <thead><tr>
            <th>${t('apps.name')}</th><th>${t('apps.app_title')}</th><th>${t('apps.partitions')}</th>
            <th>${t('apps.created_at')}</th><th>${t('apps.your_access')}</th><th>${t('common.actions')}</th>
          </tr></thead>
          <tbody>${apps.items.map((app) => html`<${AppRow} key=${app.name} app=${app} admin=${admin} />`)}</tbody>
        </table>
      </div>
      <${PagedFooter} paged=${apps} />
    </section>
  `;
}

function AppRow({ app, admin }) {
  const grant = (currentUser()?.grants ?? []).find((one) => one.app === app.name);
  const name = encodeURIComponent(app.name);
  return html`
    <tr data-app=${app.name}>
      <td><code>${app.name}</code></td>
      <td>${app.title || html`<span class="muted">—</span>`}</td>
      <td>${app.partitions}</td>
      <td><${Time} ms=${app.created_at_ms} /></td>
      <td>${admin ? label('role', 'ADMIN') : grant ? label('access', grant.access) : ''}</td>
      <td class="actions">
        <a href=${`#/jobs?app=${name}`}>${t('apps.jobs')}</a>
        <a href=${`#/executors?app=${name}`}>${t('apps.executors')}</a>
        <a href=${`#/runs?app=${name}`}>${t('apps.runs')}</a>
      </td>
    </tr>
  `;
}

// Which field an answer of the API is about: the one it names, else the one its message
// is plainly about.
function fieldOf(error) {
  if (!error) return null;
  if (error.field) return error.field;
  const message = error.message ?? '';
  if (error.status === 400 && /partitions/.test(message)) return 'partitions';
  if (error.status === 409 && /^topic .* partitions/.test(message)) return 'partitions';
  if (error.status === 400 && /app name/.test(message)) return 'name';
  if (error.status === 409 && /^app .* exists/.test(message)) return 'name';
  return null;
}

function NewAppForm({ onCreated, onClose }) {
  const [form, setForm] = useState({ name: '', partitions: '8', title: '' });
  const [errors, setErrors] = useState({});
  const [failure, setFailure] = useState(null);
  const [saving, setSaving] = useState(false);
  const set = (name) => (event) => {
    const { value } = event.target;
    setForm((previous) => ({ ...previous, [name]: value }));
  };

  const submit = async (event) => {
    event.preventDefault();
    setFailure(null);
    const found = {};
    const name = form.name.trim();
    const partitions = Number(form.partitions);
    if (!NAME.test(name)) found.name = t('apps.name_invalid');
    if (!Number.isInteger(partitions) || partitions < 1 || partitions > MAX_PARTITIONS) {
      found.partitions = t('apps.partitions_invalid', { max: MAX_PARTITIONS });
    }
    setErrors(found);
    if (Object.keys(found).length) return;
    setSaving(true);
    try {
      onCreated(await post('/api/apps', { name, partitions, title: form.title.trim() }));
    } catch (error) {
      const field = fieldOf(error);
      if (field && ['name', 'partitions', 'title'].includes(field)) setErrors({ [field]: error.message });
      else setFailure(error);
    } finally {
      setSaving(false);
    }
  };

  return html`
    <form class="panel" id="app-form" onSubmit=${submit} novalidate aria-labelledby="app-form-title"
      onKeyDown=${(event) => event.key === 'Escape' && onClose()}>
      <h2 id="app-form-title">${t('apps.new_title')}</h2>
      <${Field} id="app-name" label=${t('apps.name')} hint=${t('apps.name_hint')} error=${errors.name}>${(d) => html`
        <input id="app-name" required maxlength="64" autocomplete="off" spellcheck=${false} aria-describedby=${d}
          value=${form.name} onInput=${set('name')} />`}<//>
      <${Field} id="app-partitions" label=${t('apps.partitions')} hint=${t('apps.partitions_hint')}
        error=${errors.partitions}>${(d) => html`
        <input id="app-partitions" type="number" min="1" max=${MAX_PARTITIONS} step="1" required aria-describedby=${d}
          value=${form.partitions} onInput=${set('partitions')} />`}<//>
      <${Field} id="app-title" label=${t('apps.app_title')} error=${errors.title}>${(d) => html`
        <input id="app-title" aria-describedby=${d} value=${form.title} onInput=${set('title')} />`}<//>
      <${ErrorNote} error=${failure} />
      <div class="buttons">
        <button type="submit" id="app-save" disabled=${saving}>${t('apps.create')}</button>
        <button type="button" class="secondary" onClick=${onClose}>${t('common.cancel')}</button>
      </div>
    </form>
  `;
}
