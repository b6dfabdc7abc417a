/**
 * The main route's use case: one validated System One request answered, shared by
 * POST /v1/systemone and the `decide` command. Errors are the pipeline's own (render,
 * prompt length, engine); each caller translates them for its audience.
 */
import { AnsweringContext } from './context';
import { PipelineOptions, PipelineResult, runQuestions, WireQuestion, wireAnswer } from './pipeline';

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

export interface SystemOneAnswer {
  names: string[];
  result: PipelineResult;
  response: { model: string; answers: Record<string, unknown>; usage: { input_tokens: number; output_tokens: number } };
}

export async function answerSystemOne(
  context: AnsweringContext,
  body: SystemOneRequest,
  options: Omit<PipelineOptions, 'orders'> = {},
): Promise<SystemOneAnswer> {
  const names = Object.keys(body.questions);
  const questions = names.map((n) => body.questions[n]);
  const result = await runQuestions(context, body.state, questions, { orders: ordersOf(body.orders), ...options });
  const response = {
    model: typeof body.model === 'string' ? body.model : context.servedName,
    answers: Object.fromEntries(names.map((n, i) => [n, wireAnswer(result.questions[i], questions[i].criteria)])),
    usage: { input_tokens: result.inputTokens, output_tokens: names.length },
  };
  return { names, result, response };
}
