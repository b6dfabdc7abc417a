// What the page shows of a response: one probability bar per option (role=progressbar, its
// aria-valuenow the probability exactly as the server sent it), the chosen option marked, a
// score's mean and confidence, the engine's timings from x-service-stages, usage, and errors in
// the server's own words.

import { el } from './dom.js';

const percent = (p) => `${(100 * p).toFixed(1)}%`;

/** The options of one answer as [key, label, probability], and the key marked chosen (none when it abstained). */
function optionsOf(question, answer) {
  if (answer.type === 'noul') {
    const p = answer.noul;
    return { options: [['true', 'yes', p], ['false', 'no', 1 - p]], chosen: answer.abstained ? null : p >= 0.5 ? 'true' : 'false' };
  }
  const probabilities = Object.entries(answer.probabilities);
  if (answer.type === 'choice') {
    return { options: probabilities.map(([k, p]) => [k, k, p]), chosen: answer.abstained ? null : answer.choice };
  }
  // A score's mode is the level it most likely is; its mean is shown beside.
  const mode = probabilities.reduce((best, cur) => (cur[1] > best[1] ? cur : best))[0];
  return { options: probabilities.map(([k, p]) => [k, `${k} · ${answer.legend?.[k] ?? question?.criteria?.[k] ?? ''}`, p]), chosen: answer.abstained ? null : mode };
}

function summaryOf(answer) {
  const parts = [];
  if (answer.type === 'noul') parts.push(`P(yes) = ${answer.noul.toFixed(4)}`);
  if (answer.type === 'choice') parts.push(`choice ${JSON.stringify(answer.choice)}`, `confidence ${answer.confidence.toFixed(4)}`);
  if (answer.type === 'score') parts.push(`mean ${answer.score.toFixed(4)}`, `confidence ${answer.confidence.toFixed(4)}`);
  if (answer.unknown_probability !== undefined) parts.push(`can't tell ${answer.unknown_probability.toFixed(4)}`);
  if (answer.abstained) parts.push('abstained');
  return parts.join(' · ');
}

function bar(questionName, [key, label, p], chosen) {
  const meter = el('div', { 'data-option': key, className: 'meter', role: 'progressbar', 'aria-label': `${questionName}: ${label}`, 'aria-valuemin': '0', 'aria-valuemax': '1', 'aria-valuenow': String(p), 'aria-valuetext': percent(p) });
  const fill = el('div', { className: 'fill' });
  fill.style.width = `${100 * p}%`; // CSSOM, which the page's Content-Security-Policy allows (a style attribute it would not)
  meter.append(fill);
  const row = el('li', { className: 'bar' }, el('span', { className: 'option-label', textContent: label }), meter, el('span', { className: 'value', textContent: percent(p) }));
  if (key === chosen) {
    row.dataset.chosen = '';
    row.append(el('span', { className: 'chosen-mark', textContent: '✓ chosen' }));
  }
  return row;
}

/** The answers of a 200 response, one article per question, in the request's order. */
export function renderAnswers(container, questions, body) {
  container.replaceChildren();
  for (const [name, answer] of Object.entries(body.answers)) {
    const { options, chosen } = optionsOf(questions[name], answer);
    const list = el('ul', { className: 'bars' }, ...options.map((o) => bar(name, o, chosen)));
    const article = el('article', { className: 'answer' }, el('h3', {}, name, ' ', el('small', { textContent: answer.type })), el('p', { className: 'summary', textContent: summaryOf(answer) }), list);
    article.dataset.question = name;
    container.append(article);
  }
}

/** `prepare=1.2;warm=0.0;…` as table rows, plus the time the page waited for the response. */
export function renderTimings(tbody, stagesHeader, roundTripMs) {
  const rows = (stagesHeader ?? '').split(';').filter(Boolean).map((pair) => pair.split('='));
  rows.push(['round trip (page)', roundTripMs.toFixed(1)]);
  tbody.replaceChildren(...rows.map(([stage, ms]) => el('tr', {}, el('th', { textContent: stage }), el('td', { textContent: ms }))));
}

/** An error body's `detail` as the server phrased it: a string, or one line per problem with its location. */
export function errorText(status, body) {
  const detail = body && typeof body === 'object' ? body.detail : body;
  const lines = Array.isArray(detail) ? detail.map((p) => `${(p.loc ?? []).join('.')}: ${p.msg}`) : [typeof detail === 'string' ? detail : JSON.stringify(detail)];
  return { title: `HTTP ${status}`, lines };
}

export function renderError(box, { title, lines }) {
  box.replaceChildren(el('strong', { textContent: title }), el('ul', {}, ...lines.map((l) => el('li', { textContent: l }))));
  box.hidden = false;
}

/**
 * The request as a curl command. The body goes through a quoted here-document, so nothing in it
 * is expanded by the shell; JSON.stringify writes one line, so no line of it can end the document.
 */
export function curlCommand(origin, body) {
  return `curl -sS ${origin}/v1/systemone -H 'content-type: application/json' --data-binary @- <<'JSON'\n${JSON.stringify(body)}\nJSON`;
}
