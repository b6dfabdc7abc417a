/**
 * One request from questions to answers: normalise, render, call the engine
 * once (the state shared by every question), turn label logits into answers.
 * Shared by /v1/systemone, /v1/answer and the `decide` command.
 */
import { QuestionType } from '../rendering/profile';
import { QuestionOption, QuestionSpec, RenderedRequest, Renderer } from '../rendering/renderer';
import { renderEntry, renderInstructions, renderState } from '../rendering/state';
import { abstainingChoice, abstainingNoul, AbstentionResult, decideAbstention, reportedProbabilities } from './abstention';
import { Answer, choiceAnswer, noulAnswer, scoreAnswer, softmax } from './answers';
import { AnsweringContext, HeadEngine } from './context';
import { ClientGoneError, EngineReply } from './engine-like';
import { checkImagePlacement } from './image-state';

/** A question as the wire format sends it. */
export interface WireQuestion {
  type: QuestionType;
  instructions?: unknown;
  criteria?: unknown;
}

export interface PipelineOptions {
  /** 2: also ask each question with its options in reverse order and average the probabilities. */
  orders: 1 | 2;
  wantHidden?: boolean;
  /** Aborts when nobody waits for the answer any more: the call is then dropped if the engine has not taken it. */
  cancel?: AbortSignal;
  /** The image route: the request's images as sent, in the order of their placeholders in the state's text (image-state.ts). */
  images?: Uint8Array[];
  /** The tenant's cache salt: nothing cached under another salt (or none) serves this request, nor it them. */
  cacheSalt?: string;
  /** The client's `X-State-Key`, which picks the engine among several (server/engine-process/group.ts). */
  stateKey?: string;
}

export interface QuestionResult {
  type: QuestionType;
  /** The request's own option keys (an appended abstain option is not among them). */
  keys: string[];
  /** Per key: the readout's, tempered and averaged over the orders asked (what a server without tasks answers). */
  baseline: Map<string, number>;
  /** Per key: what the question is answered with (the baseline, or a task's); an appended abstain option included. */
  probabilities: Map<string, number>;
  /** The task applied, if any, and its identity (QuestionTask.identity). */
  task?: string;
  taskIdentity?: string;
  /** When the question has an abstain option: its probability and whether the server abstains. */
  abstention?: AbstentionResult;
  temperature: number;
  /** The as-sent order's raw readout: the prompt is the shared state segment, then the question's own (concatenated only where a readout is shown). */
  prefixTokens: readonly number[];
  questionTokens: readonly number[];
  stateTokenCount: number;
  labelIds: number[];
  labelLogits: number[];
  /** The serving engine's hidden state at the readout position, when asked for. */
  hidden?: number[];
  /** The hidden state a task read (the head engine's when there is one), when one did. */
  taskHidden?: Float32Array;
}

export interface PipelineResult {
  questions: QuestionResult[];
  /** The tasks applied, each once; abstention tasks whose threshold decided as "abstention:<id>". */
  tasks: string[];
  inputTokens: number;
  cachedTokens: number;
  computedTokens: number;
  waitedBehindRegistration: boolean;
  batchSize: number;
  /** Launched by the engine while the call before was still unfinished (--calls-in-flight 2). */
  overlapped: boolean;
  /** Which of several serving engines answered (absent: the only one). */
  engine?: number;
  stages: { prepare: number; warm: number; questions: number; readout: number; engine: number; wait: number; hop: number; plan: number };
}

/** Options by key: a Map, or a parsed object whose own keys (`__proto__` included) are the keys. */
function choiceEntries(criteria: unknown): [string, unknown][] {
  return criteria instanceof Map ? [...criteria] : Object.entries(criteria as object);
}

export function toSpec(q: WireQuestion): QuestionSpec {
  const instructions = renderInstructions(q.instructions, Renderer.defaultInstructions(q.type));
  let options: QuestionOption[];
  if (q.type === 'noul') {
    const c = (q.criteria ?? {}) as { true?: unknown; false?: unknown };
    options = [{ key: 'true', description: renderEntry(c.true) }, { key: 'false', description: renderEntry(c.false) }];
  } else if (q.type === 'choice') {
    options = choiceEntries(q.criteria).map(([key, description]) => ({ key, description: renderEntry(description) }));
  } else {
    options = (q.criteria as unknown[]).map((level, i) => ({ key: String(i), description: renderEntry(level) }));
  }
  return { type: q.type, instructions, options };
}

export async function runQuestions(context: AnsweringContext, state: unknown, questions: WireQuestion[], options: PipelineOptions): Promise<PipelineResult> {
  return runSpecs(context, state, questions.map(toSpec), options);
}

/** Hidden states at the readout position of each question, from a head engine (its own model, renderer and prompt). */
async function headHiddenStates(head: HeadEngine, state: unknown, specs: QuestionSpec[], options: PipelineOptions): Promise<Float32Array[]> {
  const rendered = await head.renderer.render(renderState(state), specs, head.engine.contextLimit, options.cacheSalt);
  const questions = rendered.questions.map((q) => ({ tokens: q.tokens, labelIds: q.labelIds }));
  const reply = await head.engine.answer({ state: rendered.prefixTokens, questions, wantHidden: true, cacheSalt: options.cacheSalt }, options.cancel);
  return reply.answers.map((a) => a.hidden!);
}

/**
 * What the engine is asked for each question: its abstain option first (appended, or the request's
 * own), then the task of the question so asked (which may reorder its options); with orders 2, each
 * again with its options reversed.
 */
function askedQuestions({ taskBook, abstentions }: AnsweringContext, specs: QuestionSpec[], orders: 1 | 2) {
  const abstaining = specs.map((s) => abstentions?.abstentionFor(s));
  const withAbstain = specs.map((s, i) => abstaining[i]?.asked ?? s);
  const tasks = withAbstain.map((s) => taskBook?.taskFor(s));
  const inOrder = withAbstain.map((s, i) => tasks[i]?.asked ?? s);
  const asked = orders === 2 ? [...inOrder, ...inOrder.map((s) => ({ ...s, options: [...s.options].reverse() }))] : inOrder;
  return { abstaining, tasks, inOrder, asked };
}

export async function runSpecs(context: AnsweringContext, state: unknown, specs: QuestionSpec[], options: PipelineOptions): Promise<PipelineResult> {
  const { engine, renderer, temperatures, headEngine, imagePadId } = context;
  const t0 = performance.now();
  const { abstaining, tasks, inOrder, asked } = askedQuestions(context, specs, options.orders);
  const rendered = await renderer.render(renderState(state), asked, engine.contextLimit, options.cacheSalt);
  if (imagePadId !== undefined) checkImagePlacement(rendered.prefixTokens, imagePadId, options.images?.length ?? 0);
  const prepare = performance.now() - t0;
  if (options.cancel?.aborted) throw new ClientGoneError();
  // Questions whose task reads the hidden state: from the head engine, asked beside the serving call, or from the serving engine itself.
  const needsHidden = tasks.map((t) => t?.wantsHidden ?? false);
  let wanted = 0;
  const headIndex = needsHidden.map((need) => (need ? wanted++ : -1));
  const fromHead = headEngine && wanted ? headHiddenStates(headEngine, state, inOrder.filter((_, i) => needsHidden[i]), options) : undefined;
  fromHead?.catch(() => undefined); // awaited below, not an unhandled rejection if the serving call fails first
  const reply = await engine.answer(
    {
      state: rendered.prefixTokens,
      ...(options.images?.length ? { images: options.images } : {}),
      questions: rendered.questions.map((q) => ({ tokens: q.tokens, labelIds: q.labelIds })),
      wantHidden: options.wantHidden || (!headEngine && wanted > 0),
      cacheSalt: options.cacheSalt,
      ...(options.stateKey !== undefined ? { stateKey: options.stateKey } : {}),
    },
    options.cancel,
  );
  const headHidden = fromHead && (await fromHead);
  const results: QuestionResult[] = specs.map((spec, i) => {
    // The orders' distributions averaged, by option key.
    const sum = new Map<string, number>();
    for (let o = 0; o < options.orders; o++) {
      const idx = i + o * specs.length;
      const p = softmax(reply.answers[idx].labelLogits, temperatures[spec.type]);
      rendered.questions[idx].keys.forEach((k, j) => sum.set(k, (sum.get(k) ?? 0) + p[j] / options.orders));
    }
    const hidden = reply.answers[i].hidden;
    const taskHidden = headIndex[i] < 0 ? undefined : headHidden ? headHidden[headIndex[i]] : hidden;
    const tasked = tasks[i]?.apply(sum, taskHidden);
    const probabilities = tasked ?? sum;
    const taskIdentity = tasked && tasks[i]!.identity;
    return {
      type: spec.type,
      keys: spec.options.map((o) => o.key),
      baseline: sum,
      probabilities,
      task: tasked && tasks[i]!.id,
      taskIdentity,
      abstention: abstaining[i] && decideAbstention(abstaining[i]!, probabilities, taskIdentity ?? null),
      temperature: temperatures[spec.type],
      prefixTokens: rendered.prefixTokens,
      questionTokens: rendered.questions[i].tokens,
      stateTokenCount: reply.stateTokens,
      labelIds: rendered.questions[i].labelIds,
      labelLogits: Array.from(reply.answers[i].labelLogits),
      hidden: hidden && Array.from(hidden),
      taskHidden,
    };
  });
  return summary(results, rendered, specs.length, reply, prepare);
}

/** The request's totals: the tasks applied, its tokens and the engine's stages. */
function summary(results: QuestionResult[], rendered: RenderedRequest, questions: number, reply: EngineReply, prepare: number): PipelineResult {
  const t = reply.timing;
  return {
    questions: results,
    tasks: [...new Set(results.flatMap((r) => [r.task, r.abstention?.task && `abstention:${r.abstention.task}`].filter((t): t is string => !!t)))],
    inputTokens: reply.stateTokens + rendered.questions.slice(0, questions).reduce((s, q) => s + q.tokens.length, 0),
    cachedTokens: reply.cachedTokens,
    computedTokens: reply.computedTokens,
    waitedBehindRegistration: t.waitedBehindRegistration,
    batchSize: t.batchSize ?? 1,
    overlapped: t.overlapped ?? false,
    ...(reply.engine !== undefined ? { engine: reply.engine } : {}),
    stages: { prepare: prepare + (t.decodeMs ?? 0), warm: t.stateMs, questions: t.questionsMs, readout: t.readoutMs, engine: t.engineMs, wait: t.waitMs, hop: t.hopMs ?? 0, plan: t.planMs ?? 0 },
  };
}

/** `criteria` as sent: a score's legend returns its levels as they came (strings, objects or arrays). */
export function wireAnswer(q: QuestionResult, criteria: unknown): Answer {
  if (q.abstention) {
    const reported = reportedProbabilities(q.keys, q.probabilities, q.abstention);
    return q.type === 'noul' ? abstainingNoul(reported, q.abstention) : abstainingChoice(q.keys, reported, q.abstention);
  }
  if (q.type === 'noul') return noulAnswer(q.probabilities);
  if (q.type === 'choice') return choiceAnswer(q.keys, q.probabilities);
  return scoreAnswer(criteria as unknown[], q.probabilities);
}
