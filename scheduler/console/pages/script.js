// A script job's source (XXL-JOB's GLUE IDE): edit and save with a note, browse the 30
// previous versions, view one, restore it (saved as a new version, the history stays).

import { html, useEffect, useState } from '../vendor/htm-preact-standalone.module.js';
import { get, patch } from '../lib/api.js';
import { Time } from '../lib/format.js';
import { HelpLink } from '../lib/help.js';
import { label, t } from '../lib/i18n.js';
import { can } from '../lib/session.js';
import { ErrorNote, Field, useLoad, useNotice } from '../lib/ui.js';

export function ScriptPage({ id }) {
  const job = useLoad(() => get(`/api/jobs/${id}`), [id]);
  const versions = useLoad(() => get(`/api/jobs/${id}/glue`), [id]);
  const [source, setSource] = useState('');
  const [remark, setRemark] = useState('');
  const [viewing, setViewing] = useState(null);
  const [error, setError] = useState(null);
  const [notice, setNotice] = useNotice();
  useEffect(() => {
    if (job.value) setSource(job.value.glue_source ?? '');
  }, [job.value]);

  if (job.error) return html`<section class="page"><${ErrorNote} error=${job.error} /></section>`;
  if (!job.value) return html`<section class="page"><p class="muted">${t('common.loading')}</p></section>`;
  const writable = can(job.value.app, 'SCRIPTS');
  const save = async (text, note) => {
    setError(null);
    try {
      await patch(`/api/jobs/${id}`, { glue_source: text, glue_remark: note });
      setNotice(t('script.saved'));
      setRemark('');
      job.reload();
      versions.reload();
    } catch (failure) {
      setError(failure);
    }
  };
  const history = versions.value ?? [];
  return html`
    <section class="page">
      <header class="page-head">
        <h1>${t('script.title', { name: job.value.name, type: label('glue_type', job.value.glue_type) })} <${HelpLink} page="script" /></h1>
        <a href=${`#/jobs/${id}`}>${t('script.back')}</a>
      </header>
      ${notice}
      <div class="script-layout">
        <form class="script-editor" onSubmit=${(event) => { event.preventDefault(); save(source, remark); }}>
          <${Field} id="script-source" label=${t('script.source')} wide error=${error?.field === 'glue_source' ? error.message : null}>${(d) => html`
            <textarea id="script-source" class="code" rows="22" spellcheck=${false} aria-describedby=${d}
              readonly=${!writable} value=${source} onInput=${(e) => setSource(e.target.value)}></textarea>`}<//>
          ${writable && html`
            <${Field} id="script-remark" label=${t('script.remark')}>${(d) => html`
              <input id="script-remark" aria-describedby=${d} value=${remark} onInput=${(e) => setRemark(e.target.value)} />`}<//>
            ${error?.field !== 'glue_source' && html`<${ErrorNote} error=${error} />`}
            <div class="buttons"><button type="submit" id="script-save">${t('common.save')}</button></div>`}
        </form>
        <aside class="script-versions" aria-labelledby="versions-title">
          <h2 id="versions-title">${t('script.versions', { n: history.length })}</h2>
          <${ErrorNote} error=${versions.error} />
          <ol>
            ${history.map((version, index) => html`
              <li class=${viewing === version ? 'selected' : ''}>
                <button type="button" class="link" data-version=${index} onClick=${() => setViewing(version)}>
                  <${Time} ms=${version.created_at_ms} />
                </button>
                <span class="muted">${version.remark}</span>
              </li>`)}
          </ol>
        </aside>
      </div>
      ${viewing && html`
        <section class="panel" id="script-version" aria-labelledby="version-title">
          <h2 id="version-title">${t('script.version_title')} <${Time} ms=${viewing.created_at_ms} /></h2>
          <pre class="code">${viewing.source}</pre>
          <div class="buttons">
            ${writable && html`<button type="button" id="script-restore"
              onClick=${() => { save(viewing.source, t('script.restored_remark', { remark: viewing.remark })); setViewing(null); }}>${t('script.restore')}</button>`}
            <button type="button" class="secondary" onClick=${() => setViewing(null)}>${t('common.close')}</button>
          </div>
        </section>`}
    </section>
  `;
}
