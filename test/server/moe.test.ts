/**
 * The mixture-of-experts bases served whole (issue 56): each named MoE base looks for its checkpoint and, with none
 * at hand, resolves to its stand-in; one served: /health and the start-up line give the experts, the top k and the active parameters; /v1/systemone and
 * /v1/answer answer, the same with and without the prefix cache and in a batch. The engine's own checks of the
 * three families (parity, invariance at every level, int8) run with the other tiny models.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { resolveBase } from '../../src/config/bases';
import { RunningServer, startServer } from '../helpers/server';

const state = 'The customer wrote that the invoice was charged twice and asked for the second charge to be returned.';
const questions = {
  paid: { type: 'noul', instructions: 'Was the invoice paid twice?' },
  want: { type: 'choice', instructions: 'What does the customer want?', criteria: { refund: null, discount: null, nothing: null } },
};

let server: RunningServer;
const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'tq-hf-'));
beforeAll(async () => {
  server = await startServer(['--base', 'qwen3-30b-a3b', '--models-dir', empty, '--dtype', 'fp32'], { HF_HUB_CACHE: empty });
});
afterAll(async () => {
  await server.stop();
  fs.rmSync(empty, { recursive: true, force: true });
});

test.each([
  ['qwen3-30b-a3b', 'Qwen/Qwen3-30B-A3B', 'tiny-qwen3-moe'],
  ['mixtral-8x7b', 'mistralai/Mixtral-8x7B-Instruct-v0.1', 'tiny-mixtral'],
  ['qwen1.5-moe-a2.7b', 'Qwen/Qwen1.5-MoE-A2.7B-Chat', 'tiny-qwen2-moe'],
])('the named base %s looks for %s, its stand-in %s', (base, repo, standIn) => {
  const resolved = resolveBase(base, empty);
  expect(resolved.profile.repo).toBe(repo);
  expect(resolved.randomWeights).toBe(true);
  expect(path.basename(resolved.checkpoint)).toBe(standIn);
});

test('a named MoE base: its stand-in served, its experts and active parameters in /health and the start-up line', async () => {
  const h = (await server.get('/health')).body;
  expect(h.base).toMatchObject({ name: 'qwen3-30b-a3b', architecture: 'Qwen3MoeForCausalLM', random_weights: true });
  expect(h.base.experts).toEqual({ count: 8, per_token: 2, intermediate_size: 48, shared_intermediate_size: null });
  // tiny-qwen3-moe: two sparse layers of 8 experts (2 a token) and a dense one between them.
  expect(h.base.active_parameters).toBeLessThan(h.base.parameters);
  const expert = 3 * 64 * 48;
  expect(h.base.parameters - h.base.active_parameters).toBe(2 * (8 - 2) * expert);
  expect(server.log()).toMatch(/Qwen3MoeForCausalLM, 8 experts, top 2 \([0-9.]+B of [0-9.]+B parameters a token\)/);
});

test('/v1/systemone answers, the same cold, cached, and in a batch with another state; /v1/answer too', async () => {
  const cold = await server.post('/v1/systemone', { state, questions });
  expect(cold.status).toBe(200);
  const cached = await server.post('/v1/systemone', { state, questions });
  const [batched] = await Promise.all([
    server.post('/v1/systemone', { state, questions }),
    server.post('/v1/systemone', { state: 'Another customer asked only about the opening hours.', questions }),
  ]);
  expect(cached.body.answers).toEqual(cold.body.answers);
  expect(batched.body.answers).toEqual(cold.body.answers);
  const answer = await server.post('/v1/answer', { state, questions: [{ kind: 'choice', instructions: 'What does the customer want?', options: ['refund', 'discount', 'nothing'] }] });
  expect(answer.status).toBe(200);
  expect(answer.body.answers[0].logits).toHaveLength(3);
});
