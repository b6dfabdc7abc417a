/** POST /v1/systemone: the published typed-question wire format. */
import Router from '@koa/router';
import { EngineLike } from '../../answering/engine-like';
import { PipelineResult, runQuestions, WireQuestion, wireAnswer } from '../../answering/pipeline';
import { Temperatures } from '../../rendering/profile';
import { Renderer } from '../../rendering/renderer';
import { toHttpError } from '../engine-errors';
import { HttpError, ValidationError } from '../http-error';
import { requestedDebug, requestedRoute } from '../request-headers';
import { respondShared } from './respond';
import { Service } from '../service';
import { validate } from '../validation';

export interface SystemOneRequest {
  model?: string;
  state: unknown;
  questions: Record<string, WireQuestion>;
  images?: string[];
  orders?: 1 | 2 | boolean;
}

export function ordersOf(v: unknown): 1 | 2 {
  return v === 2 || v === true ? 2 : 1;
}

function readoutOf(r: PipelineResult, names: string[], withHidden: boolean) {
  return Object.fromEntries(
    r.questions.map((q, i) => [
      names[i],
      {
        prompt_token_ids: q.promptTokens,
        state_token_count: q.stateTokenCount,
        label_token_ids: q.labelIds,
        label_logits: q.labelLogits,
        temperature: q.temperature,
        ...(withHidden ? { hidden: q.hidden } : {}),
      },
    ]),
  );
}

/**
 * A validated request's response body (without the debug readout) and the pipeline's result:
 * shared by the route and the `decide` command. Engine failures become HTTP errors.
 */
export async function answerSystemOne(
  engine: EngineLike,
  renderer: Renderer,
  temperatures: Temperatures,
  servedName: string,
  body: SystemOneRequest,
  options: { wantHidden?: boolean; cancel?: AbortSignal } = {},
) {
  const names = Object.keys(body.questions);
  const questions = names.map((n) => body.questions[n]);
  let result: PipelineResult;
  try {
    result = await runQuestions(engine, renderer, temperatures, body.state, questions, { orders: ordersOf(body.orders), ...options });
  } catch (e) {
    throw toHttpError(e, (i) => names[i % names.length]);
  }
  const response = {
    model: typeof body.model === 'string' ? body.model : servedName,
    answers: Object.fromEntries(names.map((n, i) => [n, wireAnswer(result.questions[i], questions[i].criteria)])),
    usage: { input_tokens: result.inputTokens, output_tokens: names.length },
  };
  return { names, result, response };
}

export function systemoneRoute(router: Router, service: Service) {
  router.post('/v1/systemone', async (ctx) => {
    const body = ctx.request.body as SystemOneRequest;
    const problems = validate('systemone', body);
    if (problems.length) throw new ValidationError(problems);
    const route = requestedRoute(ctx);
    if (route === 'image' || (body.images && body.images.length > 0))
      throw new HttpError(400, 'this server has no image engine: images need a server started with --image-model');
    const debug = service.debugReadout ? requestedDebug(ctx) : undefined;
    await respondShared(ctx, service, debug, async (cancel) => {
      const { names, result, response } = await answerSystemOne(service.engine, service.renderer, service.temperatures, service.servedName, body, { wantHidden: debug === 'hidden', cancel });
      return {
        body: { ...response, ...(debug ? { readout: readoutOf(result, names, debug === 'hidden') } : {}) },
        stages: result.stages,
        waitedBehindRegistration: result.waitedBehindRegistration,
      };
    });
  });
}
