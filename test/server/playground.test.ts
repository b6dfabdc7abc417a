/**
 * The playground page at / in headless Chromium (playwright-core driving Debian's chromium) against
 * the real server: the form is filled and sent, and every probability bar must equal what
 * /v1/systemone answers for the same request within 1e-6; the chosen option is marked, the score's
 * mean shown, the timings are x-service-stages', usage is the response's; a refused request shows
 * the server's own words; "copy as curl" copies a command that, run by bash, gets the same answer;
 * with an image engine the page sends its two images. Screenshots go to test-output/.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { Browser, chromium, Page } from 'playwright-core';
import { dataUrl, png } from '../helpers/images';
import { RunningServer, startServer } from '../helpers/server';

jest.setTimeout(180_000);

const CHROMIUM = '/usr/bin/chromium';
const OUTPUT = path.resolve(__dirname, '..', '..', 'test-output');

let browser: Browser;
beforeAll(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium`);
  fs.mkdirSync(OUTPUT, { recursive: true });
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start; containers often have a small /dev/shm.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
});
afterAll(() => browser?.close());

async function openPlayground(server: RunningServer): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(e.message));
  page.on('console', (m) => m.type() === 'error' && problems.push(m.text()));
  await page.goto(server.url + '/');
  await page.waitForSelector('body[data-ready]');
  expect(problems).toEqual([]);
  return page;
}

/** Every bar on the page: question -> option -> the probability its aria-valuenow says, and the chosen option. */
async function barsOf(page: Page) {
  return page.$$eval('.answer', (articles) =>
    Object.fromEntries(
      articles.map((a) => [
        (a as HTMLElement).dataset.question!,
        {
          bars: Object.fromEntries([...a.querySelectorAll('[role=progressbar]')].map((m) => [m.getAttribute('data-option'), Number(m.getAttribute('aria-valuenow'))])),
          chosen: a.querySelector('[data-chosen] [role=progressbar]')?.getAttribute('data-option') ?? null,
          summary: a.querySelector('.summary')!.textContent,
        },
      ]),
    ),
  );
}

/** The probabilities a /v1/systemone answer gives each option, keyed as the page keys its bars. */
function expectedBars(answer: any): Record<string, number> {
  return answer.type === 'noul' ? { true: answer.noul, false: 1 - answer.noul } : answer.probabilities;
}

function expectBarsMatch(shown: Record<string, { bars: Record<string, number> }>, answers: Record<string, any>) {
  expect(Object.keys(shown)).toEqual(Object.keys(answers));
  for (const [name, answer] of Object.entries(answers)) {
    const want = expectedBars(answer);
    expect(Object.keys(shown[name].bars)).toEqual(Object.keys(want));
    for (const [k, p] of Object.entries(want)) expect(Math.abs(shown[name].bars[k] - p)).toBeLessThan(1e-6);
  }
}

describe('the text engine', () => {
  let server: RunningServer, page: Page;
  beforeAll(async () => {
    server = await startServer();
    page = await openPlayground(server);
  }, 120_000);
  afterAll(() => server.stop());

  const STATE = 'My order #4411 came a fortnight late and the lamp inside was broken. I want my money back.';

  test('the served model is shown; no image inputs without an image engine', async () => {
    const models = await server.get('/v1/models');
    expect(await page.textContent('#model')).toBe(models.body.models[0].name);
    expect(await page.isHidden('#images')).toBe(true);
    expect(await page.textContent('#engines')).toBe('text engine');
  });

  test('filled and asked: the bars equal /v1/systemone within 1e-6, the chosen marked, timings, usage, raw JSON and curl', async () => {
    await page.fill('#state', STATE);
    // A fourth question built in the form: a choice of 4 options.
    await page.click('#add-question');
    const q = page.locator('.question').last();
    await q.locator('.question-name').fill('department');
    await q.locator('.question-type').selectOption('choice');
    await q.locator('.question-instructions').fill('Which department should handle this?');
    for (const [key, description] of [['billing', 'payments and refunds'], ['shipping', 'late or lost parcels'], ['quality', 'broken goods'], ['other', '']]) {
      await q.locator('.add-option').click();
      await q.locator('.option-key').last().fill(key);
      await q.locator('.option-description').last().fill(description);
    }
    await page.click('#ask');
    await page.waitForSelector('#facts:not([hidden])');

    const body = {
      state: STATE,
      questions: {
        tone: { type: 'choice', instructions: 'What is the tone of this message?', criteria: { angry: 'the writer is angry', calm: 'the writer is calm', pleased: 'the writer is pleased' } },
        refund: { type: 'noul', instructions: 'Does the writer ask for a refund?' },
        severity: { type: 'score', instructions: 'How severe is the problem?', criteria: ['minor', 'moderate', 'serious'] },
        department: { type: 'choice', instructions: 'Which department should handle this?', criteria: { billing: 'payments and refunds', shipping: 'late or lost parcels', quality: 'broken goods', other: null } },
      },
    };
    const direct = await server.post('/v1/systemone', body);
    expect(direct.status).toBe(200);
    const shown = await barsOf(page);
    expectBarsMatch(shown, direct.body.answers);
    const { tone, refund, severity, department } = direct.body.answers;
    expect(shown.tone.chosen).toBe(tone.choice);
    expect(shown.department.chosen).toBe(department.choice);
    expect(shown.refund.chosen).toBe(refund.noul >= 0.5 ? 'true' : 'false');
    expect(shown.severity.summary).toContain(`mean ${severity.score.toFixed(4)}`);
    expect(shown.severity.summary).toContain(`confidence ${severity.confidence.toFixed(4)}`);
    expect(shown.tone.summary).toContain(`confidence ${tone.confidence.toFixed(4)}`);

    // Timings: the stages of x-service-stages, then the page's round trip.
    const stages = await page.$$eval('#timings th', (ths) => ths.map((t) => t.textContent));
    expect(stages).toEqual(['prepare', 'warm', 'questions', 'readout', 'engine', 'wait', 'hop', 'plan', 'round trip (page)']);
    expect(await page.textContent('#usage')).toBe(`${direct.body.usage.input_tokens} input tokens, 4 output tokens`);
    expect(await page.textContent('#served-route')).toBe(`text route of ${direct.body.model}`);
    const raw = JSON.parse((await page.textContent('#raw'))!);
    expect(raw.usage).toEqual(direct.body.usage);
    expectBarsMatch(shown, raw.answers);

    // Copy as curl: the clipboard holds the command shown, and bash running it gets the same answers.
    await page.click('#copy-curl');
    await page.waitForSelector('#copied:has-text("copied")');
    const curl = await page.evaluate(() => navigator.clipboard.readText());
    expect(curl).toBe(await page.textContent('#curl'));
    const viaCurl = JSON.parse(execFileSync('bash', ['-c', curl], { encoding: 'utf8' }));
    expectBarsMatch(shown, viaCurl.answers);

    await page.screenshot({ path: path.join(OUTPUT, 'playground.png'), fullPage: true });
  });

  test("a refused request shows the server's words; a duplicate question name is not sent", async () => {
    // A score question with no levels: the server's 422, line by line.
    const q = page.locator('.question').nth(2);
    while ((await q.locator('.option .remove').count()) > 0) await q.locator('.option .remove').first().click();
    await page.click('#ask');
    await page.waitForSelector('#error:not([hidden])');
    const sent = JSON.parse((await page.textContent('#curl'))!.split('\n')[1]);
    expect(sent.questions.severity.criteria).toEqual([]);
    const refused = await server.post('/v1/systemone', sent);
    expect(refused.status).toBe(422);
    expect(JSON.parse((await page.textContent('#raw'))!)).toEqual(refused.body);
    const lines = await page.$$eval('#error li', (lis) => lis.map((l) => l.textContent));
    expect(lines).toEqual(refused.body.detail.map((p: any) => `${p.loc.join('.')}: ${p.msg}`));
    expect(await page.textContent('#error strong')).toBe('HTTP 422');
    expect(await page.locator('.answer').count()).toBe(0);

    await page.locator('.question-name').nth(1).fill('tone');
    await page.click('#ask');
    expect(await page.textContent('#error li')).toBe('two questions are named "tone": names are the keys of the answers, so they must differ');
    await page.screenshot({ path: path.join(OUTPUT, 'playground-error.png'), fullPage: true });
  });

  test('the page and its files come from this server only (Content-Security-Policy); unknown files are 404', async () => {
    const res = await fetch(server.url + '/');
    expect(res.headers.get('content-security-policy')).toMatch(/^default-src 'self'/);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    for (const file of ['playground.js', 'builder.js', 'results.js', 'dom.js', 'playground.css']) expect((await fetch(`${server.url}/playground/${file}`)).status).toBe(200);
    for (const file of ['..%2Fapp.ts', 'missing.js', '%2e%2e%2f%2e%2e%2fpackage.json']) expect((await fetch(`${server.url}/playground/${file}`)).status).toBe(404);
  });
});

test('with an image engine: two images from the form are sent, and the bars equal /v1/systemone', async () => {
  const server = await startServer(['--image-model', 'tiny-qwen2-vl']);
  try {
    const page = await openPlayground(server);
    expect(await page.isVisible('#images')).toBe(true);
    const [a, b] = [await png(90, 60, 41), await png(60, 90, 42)];
    await page.setInputFiles('#image-1', { name: 'a.png', mimeType: 'image/png', buffer: a });
    await page.setInputFiles('#image-2', { name: 'b.png', mimeType: 'image/png', buffer: b });
    await page.fill('#state', 'Two pictures of a parcel.');
    await page.click('#ask');
    await page.waitForSelector('#facts:not([hidden])');
    expect(await page.textContent('#served-route')).toMatch(/^image route of /);
    const curl = (await page.textContent('#curl'))!;
    const sent = JSON.parse(curl.split('\n')[1]);
    expect(sent.images).toEqual([dataUrl(a), dataUrl(b)]);
    const direct = await server.post('/v1/systemone', sent);
    expect(direct.status).toBe(200);
    expect(direct.headers.get('x-service-route')).toBe('image');
    expectBarsMatch(await barsOf(page), direct.body.answers);
    await page.screenshot({ path: path.join(OUTPUT, 'playground-images.png'), fullPage: true });
  } finally {
    await server.stop();
  }
});
