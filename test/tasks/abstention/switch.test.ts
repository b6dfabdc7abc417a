/**
 * --abstention off changes only the decision (docs/abstention.md): a question is asked exactly as
 * with the switch on (the abstention task's own abstain option, not --abstain-option's; the same
 * task applied after it), so probabilities and unknown_probability are byte-identical, and only
 * `abstained` (and in the key form `choice`) comes from the default rule instead of the threshold.
 * Both servers append "Not sure" by --abstain-option, a text no task uses, so a question asked
 * without its task's option would show. The thresholds are registered, then imported at τ = 0
 * (abstain on every question) so that the two decisions differ wherever the default rule answers.
 * (Registration's reasons are tested in routes.test.ts; here, an imported record without one.)
 */
import { blankAbstentionExamples, blankState, CANT_TELL, codeQuestion } from '../../helpers/abstention';
import { RunningServer, startServer } from '../../helpers/server';
import { keywordState, priorExamples, priorQuestion } from '../../helpers/tasks';

jest.setTimeout(300_000);

const NONE = 'None of these departments';
const serverFlags = ['--abstain-option', 'Not sure'];
let on: RunningServer, off: RunningServer;
let prior: any, reimported: any;

/** A stored abstention task as exported, its threshold made to decide on every question (τ = 0) over `fittedWith`. */
const deciding = (t: any, fittedWith: string | null) => ({ ...t, applied: true, threshold: 0, fitted_with: fittedWith, record: { ...t.record, applied: true, reason: undefined } });
const exportedAbstention = async (id: string) => (await on.get('/v1/tasks?full=1')).body.abstention_tasks.find((t: any) => t.id === id);
const importInto = async (s: RunningServer, body: object) => {
  const r = await s.post('/v1/tasks/import', body);
  expect(r.status).toBe(200);
  expect(r.body.abstention?.refused ?? []).toEqual([]);
};

beforeAll(async () => {
  [on, off] = await Promise.all([startServer(serverFlags), startServer([...serverFlags, '--abstention', 'off'])]);
  // The append form: registered from examples (not justified on these), then imported deciding.
  const departments = [
    ...priorExamples(12).map((e) => ({ ...e, answer: e.answer as string | null })),
    ...priorExamples(12, 77).map((e) => ({ ...e, answer: null })),
  ];
  expect((await on.post('/v1/abstention/tasks', { id: 'dept-none', option: { append: NONE }, examples: departments })).status).toBe(200);
  // Edited to not applied, without a reason, imported, listed: the record says why.
  const stored = await exportedAbstention('dept-none');
  await importInto(on, { abstention_tasks: [{ ...stored, applied: false, threshold: null, record: { ...stored.record, applied: false, reason: undefined } }] });
  reimported = (await on.get('/v1/abstention/tasks')).body.tasks.find((t: any) => t.id === 'dept-none');
  await importInto(on, { abstention_tasks: [deciding(stored, null)] });
  // A calibration task in front: fitted on the question as served, NONE appended.
  prior = (await on.post('/v1/tasks', { id: 'prior', examples: priorExamples(80) })).body;
  expect(prior.applied).toBe('calibration');
  expect(prior.options.map((o: any) => o.key)).toContain(NONE);
  const priorIdentity = `prior@${prior.record.examples_sha256.slice(0, 16)}:calibration`;
  await importInto(on, { abstention_tasks: [deciding(await exportedAbstention('dept-none'), priorIdentity)] });
  // The key form: the requests' own "can't tell".
  expect((await on.post('/v1/abstention/tasks', { id: 'code-key', option: { key: CANT_TELL }, examples: blankAbstentionExamples(10, 10, 3000, [CANT_TELL]) })).status).toBe(200);
  await importInto(on, { abstention_tasks: [deciding(await exportedAbstention('code-key'), null)] });
  const full = (await on.get('/v1/tasks?full=1')).body;
  await importInto(off, { tasks: full.tasks, abstention_tasks: full.abstention_tasks });
});
afterAll(() => Promise.all([on?.stop(), off?.stop()]));

test('a threshold not applied says why, also after an import of a record without the reason', () => {
  expect(reimported).toMatchObject({ applied: false, record: { applied: false, reason: 'not justified (the imported record gives no reason)' } });
});

const ask = (s: RunningServer, state: string, question: object) => s.post('/v1/systemone', { state, questions: { q: question } });

/** The default rule on an answer: abstain when the abstain option is more probable than each other option (an appended one's share put back). */
function byDefaultRule(a: any, appendedKey: boolean): boolean {
  const others = Object.entries(a.probabilities as Record<string, number>).filter(([k]) => k !== CANT_TELL || appendedKey).map(([, p]) => (appendedKey ? p * (1 - a.unknown_probability) : p));
  return others.every((p) => a.unknown_probability > p);
}

test.each([
  ['append form, a calibration task in front', priorQuestion, (i: number) => `Ticket ${i}: ${'lorem '.repeat(i % 5)}refund`, 'prior,abstention:dept-none', 'prior'],
  ['key form', codeQuestion([CANT_TELL]), (i: number) => (i % 2 ? blankState(9000 + i) : keywordState('kilo', 9000 + i)), 'abstention:code-key', null],
])('%s: the same bytes on and off; only abstained (by the default rule) differs', async (_form, question, state, tasksOn, tasksOff) => {
  const appended = question === priorQuestion;
  let decidedApart = 0;
  for (let i = 0; i < 8; i++) {
    const [a, b] = await Promise.all([ask(on, state(i), question), ask(off, state(i), question)]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect([a.headers.get('x-service-tasks'), b.headers.get('x-service-tasks')]).toEqual([tasksOn, tasksOff]);
    const [x, y] = [a.body.answers.q, b.body.answers.q];
    expect(JSON.stringify(y.probabilities)).toBe(JSON.stringify(x.probabilities));
    expect(y.unknown_probability).toBe(x.unknown_probability);
    expect(Object.keys(x.probabilities)).not.toContain('Not sure');
    expect(x.abstained).toBe(true); // τ = 0
    expect(y.abstained).toBe(byDefaultRule(y, appended));
    if (!appended) expect([x.choice, y.choice === CANT_TELL]).toEqual([CANT_TELL, y.abstained]);
    if (!y.abstained) decidedApart++;
  }
  expect(decidedApart).toBeGreaterThan(0);
});

test('/health: the abstain options offered either way; the thresholds applied only while on', async () => {
  const [h, g] = await Promise.all([on.get('/health'), off.get('/health')]);
  const seen = (b: any) => ({ enabled: b.thresholds_enabled, registered: b.tasks.registered, offered: [...b.tasks.options_offered].sort(), applied: [...b.tasks.applied].sort() });
  expect(seen(h.body.systemone.abstention)).toEqual({ enabled: true, registered: 2, offered: ['code-key', 'dept-none'], applied: ['code-key', 'dept-none'] });
  expect(seen(g.body.systemone.abstention)).toEqual({ enabled: false, registered: 2, offered: ['code-key', 'dept-none'], applied: [] });
});
