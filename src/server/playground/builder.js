// The question builder: one fieldset per question (name, type, instructions, and the options its
// type takes), read back as the `questions` object of a /v1/systemone request. Nothing is checked
// here beyond what a JSON object cannot hold (two questions of one name): the server checks the
// rest and the page shows its words.

import { el } from './dom.js';

const ROW_HINTS = {
  choice: { add: 'Add an option', key: 'key', description: 'description (optional)' },
  score: { add: 'Add a level', description: 'level description (lowest first)' },
};

/** One option row: a key (choice) and a description; a remove button. */
function optionRow(type, key = '', description = '') {
  const hint = ROW_HINTS[type];
  const row = el('li', { className: 'option' });
  if (type === 'choice') row.append(el('input', { className: 'option-key', value: key, placeholder: hint.key, 'aria-label': 'option key' }));
  row.append(el('input', { className: 'option-description', value: description, placeholder: hint.description, 'aria-label': type === 'choice' ? 'option description' : 'level description' }));
  row.append(el('button', { type: 'button', className: 'remove', textContent: '×', 'aria-label': 'remove', onclick: () => row.remove() }));
  return row;
}

/** The options editor of one type; noul's two sides are fixed. */
function criteriaEditor(type, criteria) {
  if (type === 'noul') {
    const side = (name, label) => el('label', {}, label, el('input', { className: `noul-${name}`, value: criteria?.[name] ?? '', placeholder: 'optional' }));
    return el('div', { className: 'criteria noul' }, side('true', 'Yes means'), side('false', 'No means'));
  }
  const list = el('ol', { className: 'options', start: type === 'score' ? 0 : 1 });
  const rows = type === 'choice' ? Object.entries(criteria ?? {}) : (criteria ?? []).map((d) => ['', d]);
  for (const [key, description] of rows) list.append(optionRow(type, key, description ?? ''));
  const add = el('button', { type: 'button', className: 'add-option', textContent: ROW_HINTS[type].add, onclick: () => list.append(optionRow(type)) });
  return el('div', { className: `criteria ${type}` }, list, add);
}

let counter = 0;

/** Adds a question's fieldset to `container`: `initial` is a question of the wire format plus its name. */
export function addQuestion(container, initial = { name: '', type: 'noul' }) {
  const n = ++counter;
  const box = el('fieldset', { className: 'question' });
  const name = el('input', { className: 'question-name', value: initial.name || `q${n}`, 'aria-label': 'question name' });
  const type = el('select', { className: 'question-type', 'aria-label': 'question type' });
  for (const t of ['noul', 'choice', 'score']) type.append(el('option', { value: t, textContent: t, selected: t === initial.type }));
  const instructions = el('input', { className: 'question-instructions', value: initial.instructions ?? '', placeholder: 'instructions (optional: a default per type is used)', 'aria-label': 'instructions' });
  let criteria = criteriaEditor(initial.type, initial.criteria);
  type.onchange = () => {
    const next = criteriaEditor(type.value, undefined);
    criteria.replaceWith(next);
    criteria = next;
  };
  const remove = el('button', { type: 'button', className: 'remove', textContent: 'Remove', onclick: () => box.remove() });
  box.append(el('legend', {}, 'Question'), el('div', { className: 'question-head' }, name, type, remove), instructions, criteria);
  container.append(box);
  return box;
}

/** The wire format's value of one question fieldset. */
function readQuestion(box) {
  const type = box.querySelector('.question-type').value;
  const question = { type };
  const instructions = box.querySelector('.question-instructions').value;
  if (instructions.trim()) question.instructions = instructions;
  if (type === 'noul') {
    const t = box.querySelector('.noul-true').value, f = box.querySelector('.noul-false').value;
    if (t || f) question.criteria = { true: t, false: f };
  } else if (type === 'choice') {
    question.criteria = {};
    for (const row of box.querySelectorAll('.option')) {
      const key = row.querySelector('.option-key').value, description = row.querySelector('.option-description').value;
      if (Object.hasOwn(question.criteria, key)) throw new Error(`two options are keyed "${key}": keys are the answers' names, so they must differ`);
      question.criteria[key] = description === '' ? null : description;
    }
  } else {
    question.criteria = [...box.querySelectorAll('.option-description')].map((i) => i.value);
  }
  return question;
}

/** `{ questions }`, or `{ problem }` when two questions or two options share a name (a JSON object keeps one). */
export function readQuestions(container) {
  const questions = {};
  try {
    for (const box of container.querySelectorAll('.question')) {
      const name = box.querySelector('.question-name').value;
      if (Object.hasOwn(questions, name)) throw new Error(`two questions are named "${name}": names are the keys of the answers, so they must differ`);
      questions[name] = readQuestion(box);
    }
  } catch (e) {
    return { problem: e.message };
  }
  return { questions };
}
