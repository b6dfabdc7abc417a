// The playground page: reads the served model (GET /v1/models) and whether an image engine runs
// (GET /health), builds a /v1/systemone request from the form, sends it, and shows the answer.
// It speaks only the server's public routes, as any client would.
import { addQuestion, readQuestions } from './builder.js';
import { curlCommand, errorText, renderAnswers, renderError, renderTimings } from './results.js';

const $ = (id) => document.getElementById(id);

const EXAMPLE_QUESTIONS = [
  { name: 'tone', type: 'choice', instructions: 'What is the tone of this message?', criteria: { angry: 'the writer is angry', calm: 'the writer is calm', pleased: 'the writer is pleased' } },
  { name: 'refund', type: 'noul', instructions: 'Does the writer ask for a refund?' },
  { name: 'severity', type: 'score', instructions: 'How severe is the problem?', criteria: ['minor', 'moderate', 'serious'] },
];

async function describeServer() {
  const [models, health] = await Promise.all([fetch('/v1/models').then((r) => r.json()), fetch('/health').then((r) => r.json())]);
  $('model').textContent = models.models?.[0]?.name ?? 'unknown';
  const images = Boolean(health.image_engine);
  $('engines').textContent = images ? `text engine and image engine (${health.image_engine.model.name})` : 'text engine';
  $('images').hidden = !images;
}

const readAsDataUrl = (file) =>
  new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });

/** The chosen files, in order, as data URLs (the wire format's `images`). */
async function chosenImages() {
  if ($('images').hidden) return [];
  const files = ['image-1', 'image-2'].map((id) => $(id).files[0]).filter(Boolean);
  return Promise.all(files.map(readAsDataUrl));
}

function showPreviews() {
  const preview = (file) => {
    const img = Object.assign(document.createElement('img'), { src: URL.createObjectURL(file), alt: file.name });
    img.onload = () => URL.revokeObjectURL(img.src);
    return img;
  };
  $('image-previews').replaceChildren(...['image-1', 'image-2'].map((id) => $(id).files[0]).filter(Boolean).map(preview));
}

function clearResult() {
  for (const id of ['error', 'facts', 'raw-block', 'curl-block']) $(id).hidden = true;
  $('answers').replaceChildren();
  $('copied').textContent = '';
}

async function ask(event) {
  event.preventDefault();
  clearResult();
  const { questions, problem } = readQuestions($('questions'));
  if (problem) {
    $('status').textContent = 'Not sent.';
    return renderError($('error'), { title: 'Not sent', lines: [problem] });
  }
  const body = { state: $('state').value, questions };
  const images = await chosenImages();
  if (images.length) body.images = images;

  $('curl').textContent = curlCommand(location.origin, body);
  $('curl-block').hidden = false;
  $('status').textContent = 'Asking…';
  $('ask').disabled = true;
  const t0 = performance.now();
  try {
    const response = await fetch('/v1/systemone', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const text = await response.text();
    const roundTrip = performance.now() - t0;
    let parsed = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* shown raw */
    }
    $('raw').textContent = typeof parsed === 'string' ? parsed : JSON.stringify(parsed, null, 2);
    $('raw-block').hidden = false;
    if (!response.ok) {
      $('status').textContent = `The server refused the request (${response.status}).`;
      return renderError($('error'), errorText(response.status, parsed));
    }
    renderAnswers($('answers'), questions, parsed);
    $('served-route').textContent = `${response.headers.get('x-service-route') ?? '?'} route of ${parsed.model}`;
    $('usage').textContent = `${parsed.usage.input_tokens} input tokens, ${parsed.usage.output_tokens} output tokens`;
    renderTimings($('timings').tBodies[0], response.headers.get('x-service-stages'), roundTrip);
    $('facts').hidden = false;
    $('status').textContent = `Answered in ${roundTrip.toFixed(0)} ms.`;
  } catch (e) {
    $('status').textContent = 'No answer.';
    renderError($('error'), { title: 'The request failed', lines: [String(e.message ?? e)] });
  } finally {
    $('ask').disabled = false;
  }
}

async function copyCurl() {
  try {
    await navigator.clipboard.writeText($('curl').textContent);
    $('copied').textContent = 'copied';
  } catch {
    // No clipboard (a page not served over https or localhost): select it for the user to copy.
    getSelection().selectAllChildren($('curl'));
    $('copied').textContent = 'selected: press Ctrl+C';
  }
}

for (const q of EXAMPLE_QUESTIONS) addQuestion($('questions'), q);
$('add-question').onclick = () => addQuestion($('questions'));
$('ask-form').onsubmit = ask;
$('copy-curl').onclick = copyCurl;
for (const id of ['image-1', 'image-2']) $(id).onchange = showPreviews;
describeServer()
  .then(() => document.body.setAttribute('data-ready', ''))
  .catch((e) => renderError($('error'), { title: 'Cannot read the server', lines: [String(e.message ?? e)] }));
