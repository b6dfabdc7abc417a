/** The rendering flags change the prompt the model sees, and the server still answers in the same shape. */
import { tinyModel } from '../helpers/models';
import { RunningServer, startServer } from '../helpers/server';
import { modelTokenizer } from '../helpers/tokens';

const body = {
  state: 'Shipment 7 left Hamburg late.',
  questions: {
    late: { type: 'noul', instructions: 'Was it late?', criteria: { true: 'after the deadline' } },
    port: { type: 'choice', instructions: 'Which port?', criteria: { red: null, blue: 'north' } },
    risk: { type: 'score', criteria: ['low', 'high'] },
  },
};

// The servers of the tests below, started at once (each start waits on its engine process: they overlap).
const flagSets: Record<string, string[]> = {
  defaults: [],
  questionFirst: ['--layout', 'question-first', '--template', 'plain', '--system-turn', 'none', '--yes-no', 'letters', '--choice-labels', 'keys', '--score-labels', 'letters'],
  turnStart: ['--answer-position', 'turn-start', '--system-turn', 'Be brief.'],
  optionsBefore: ['--options-position', 'before'],
};
const servers: Record<string, RunningServer> = {};
beforeAll(async () => {
  await Promise.all(Object.entries(flagSets).map(async ([name, args]) => (servers[name] = await startServer(['--debug-readout', ...args]))));
});
afterAll(async () => Promise.all(Object.values(servers).map((s) => s.stop())));

async function prompts(name: keyof typeof flagSets) {
  const server = servers[name];
  const r = await server.post('/v1/systemone', body, { 'x-service-debug': 'readout' });
  expect(r.status).toBe(200);
  expect(Object.keys(r.body.answers)).toEqual(['late', 'port', 'risk']);
  const tok = await modelTokenizer(tinyModel('tiny-qwen3'));
  const text: Record<string, string> = {};
  for (const [k, v] of Object.entries<any>(r.body.readout)) text[k] = await tok.decode(v.prompt_token_ids);
  return { text, readout: r.body.readout, health: (await server.get('/health')).body };
}

test('defaults: chat template with a system turn, state first, Yes/No words, lettered options, digit levels, "Answer:" cue', async () => {
  const { text, health } = await prompts('defaults');
  expect(text.late).toMatch(/^<\|im_start\|>system\nYou answer questions/);
  expect(text.late.indexOf('<state>')).toBeLessThan(text.late.indexOf('Question:'));
  expect(text.late).toContain('Answer Yes or No.\nYes: after the deadline');
  expect(text.port).toContain('A. red\nB. blue: north');
  // Qwen splits " 0" into two tokens, so its single-token "digit" labels start with letters.
  const [d0, d1] = health.prompt_format.labels_first.digits;
  expect([d0, d1]).toEqual(['A', 'B']);
  expect(text.risk).toContain(`${d0}. low\n${d1}. high`);
  expect(text.late.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\nAnswer:')).toBe(true);
});

test('question first, plain text, no system turn, lettered yes/no, own keys as labels, letter levels', async () => {
  const { text, health } = await prompts('questionFirst');
  expect(text.late).not.toContain('<|im_start|>');
  expect(text.late.indexOf('Question:')).toBeLessThan(text.late.indexOf('<state>'));
  expect(text.late).toContain('A. Yes: after the deadline\nB. No');
  expect(text.port).toContain('\nred\nblue: north\nAnswer with the name of one option.');
  expect(text.risk).toContain('A. low\nB. high');
  expect(text.risk.endsWith('\n\nAnswer:')).toBe(true);
  expect(health.prompt_format).toMatchObject({ layout: 'question-first', template: 'plain', system_turn: null });
});

test('turn-start: the label is read right after the assistant header, without a cue', async () => {
  const { text, readout } = await prompts('turnStart');
  expect(text.late).toMatch(/^<\|im_start\|>system\nBe brief\./);
  expect(text.late.endsWith('</think>\n\n')).toBe(true);
  const tok = await modelTokenizer(tinyModel('tiny-qwen3'));
  expect(readout.port.label_token_ids[0]).toBe(tok.tokenToId('A'));
});

test('options before the instructions: questions sharing an option list begin with the same tokens (computed once by the engine)', async () => {
  const { text, health } = await prompts('optionsBefore');
  expect(text.port).toContain('\n\nOptions:\nA. red\nB. blue: north\nQuestion: Which port?\nAnswer with the label of one option.');
  expect(health.prompt_format.options).toContain('before the instructions');
  const server = servers.optionsBefore;
  {
    const criteria = { refund: 'money back', discount: 'a lower price', nothing: null };
    const r = await server.post(
      '/v1/systemone',
      { state: 'The customer wrote twice.', questions: { a: { type: 'choice', instructions: 'What does the customer want?', criteria }, b: { type: 'choice', instructions: 'What would calm them?', criteria } } },
      { 'x-service-debug': 'readout' },
    );
    expect(r.status).toBe(200);
    const own = (k: string) => r.body.readout[k].prompt_token_ids.slice(r.body.readout[k].state_token_count) as number[];
    const [a, b] = [own('a'), own('b')];
    let common = 0;
    while (common < a.length && a[common] === b[common]) common++;
    const tok = await modelTokenizer(tinyModel('tiny-qwen3'));
    // The whole option list is in the common part.
    expect(await tok.decode(a.slice(0, common))).toContain('A. refund: money back\nB. discount: a lower price\nC. nothing\nQuestion:');
    // ... and the engine computes it once: fewer tokens computed than the prompt holds.
    const answered = await server.post('/v1/answer', {
      state: 'The customer wrote again.',
      questions: [
        { kind: 'choice', instructions: 'What does the customer want?', options: Object.keys(criteria) },
        { kind: 'choice', instructions: 'What would calm them?', options: Object.keys(criteria) },
      ],
    });
    expect(answered.status).toBe(200);
    expect(answered.body.timing.computed_tokens).toBeLessThanOrEqual(answered.body.usage.input_tokens - (common - 1));
  }
});
