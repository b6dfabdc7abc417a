/**
 * POST /v1/answer: the engine's own form, below the main route. Questions are
 * a list with `kind`, `instructions` and `options` (choice: option names, with
 * optional `descriptions`; score: levels lowest first; noul: none, the options
 * are ["yes", "no"]). Each answer carries its options, probabilities in the
 * same order, and the raw readout (label token ids, label logits, temperature).
 */
import Router from '@koa/router';
import { runQuestions, WireQuestion } from '../../answering/pipeline';
import { ordersOf } from '../../answering/systemone';
import { invalid, ValidationError } from '../../wire/http-error';
import { Service } from '../service/service';
import { validate } from '../../wire/validation';
import { requestedCacheSalt, requestedStateKey } from '../service/request-headers';
import { respondShared } from './respond';
import { questionNames } from '../../answering/http-errors';

interface AnswerQuestion {
  kind: 'noul' | 'choice' | 'score';
  instructions?: unknown;
  options?: string[];
  descriptions?: unknown[];
}

/** Option names are data: a Map keeps "__proto__" or "constructor" an option like any other. */
function toWire(q: AnswerQuestion): WireQuestion {
  if (q.kind === 'noul') return { type: 'noul', instructions: q.instructions };
  if (q.kind === 'score') return { type: 'score', instructions: q.instructions, criteria: q.options };
  return { type: 'choice', instructions: q.instructions, criteria: new Map(q.options!.map((o, i) => [o, q.descriptions?.[i] ?? null])) };
}

export function answerRoute(router: Router, service: Service) {
  router.post('/v1/answer', async (ctx) => {
    const body = ctx.request.body as { state: unknown; questions: AnswerQuestion[]; orders?: unknown };
    const problems = validate('answer', body);
    if (problems.length) throw new ValidationError(problems);
    for (const [i, q] of body.questions.entries())
      if (q.kind === 'choice' && new Set(q.options).size !== q.options!.length) throw invalid(['body', 'questions', i, 'options'], 'must not repeat an option');
    const cacheSalt = requestedCacheSalt(ctx, service.cacheSaltHeader);
    const sharing = { route: 'text' as const, cacheSalt, names: questionNames((i) => String(i % body.questions.length)) };
    await respondShared(ctx, service, sharing, async (cancel) => {
      const t0 = performance.now();
      // The abstention extension is the main route's: here a question is asked with its own options only.
      const r = await runQuestions({ ...service, abstentions: undefined }, body.state, body.questions.map(toWire), { orders: ordersOf(body.orders), cancel, cacheSalt, stateKey: requestedStateKey(ctx) });
      return {
        result: r,
        body: {
          model: service.servedName,
          answers: r.questions.map((q, i) => ({
            kind: q.type,
            options: q.type === 'noul' ? ['yes', 'no'] : body.questions[i].options,
            probabilities: q.keys.map((k) => q.probabilities.get(k)),
            label_token_ids: q.labelIds,
            logits: q.labelLogits,
            temperature: q.temperature,
          })),
          usage: { input_tokens: r.inputTokens, output_tokens: r.questions.length },
          timing: {
            prepare_ms: r.stages.prepare,
            warm_ms: r.stages.warm,
            questions_ms: r.stages.questions,
            readout_ms: r.stages.readout,
            engine_ms: r.stages.engine,
            waited_ms: r.stages.wait,
            hop_ms: r.stages.hop,
            plan_ms: r.stages.plan,
            waited_behind_registration: r.waitedBehindRegistration,
            cached_tokens: r.cachedTokens,
            computed_tokens: r.computedTokens,
            batch_size: r.batchSize,
            overlapped_previous_call: r.overlapped,
            total_ms: performance.now() - t0,
          },
        },
      };
    });
  });
}
