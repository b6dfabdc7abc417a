/**
 * Registration bodies, checked whole before any engine work (docs/tasks.md and docs/abstention.md).
 * Both kinds share `{id, examples: [{request, answer}]}` with 10 to 10,000 examples, each a
 * main-route request with exactly one question, all asking the same question (type,
 * instructions, options with their descriptions; a choice's keys in any order) as the task
 * reads it. Every problem is reported with the example's index and field, at most 20.
 *
 * POST /v1/tasks: text only; each answer an option key: noul `true`/`false` (boolean or
 * string), choice a key, score a level index (0 = lowest); at least 2 distinct answers.
 */
import { toSpec, WireQuestion } from '../../answering/pipeline';
import { collectImages, ImageInput } from '../../images/collect';
import { MAX_OPTIONS } from '../../rendering/labels';
import { QuestionSpec } from '../../rendering/renderer';
import { TaskChangedError } from '../../tasks/abstention/register';
import { isObject, TASK_ID, TASK_ID_RULE } from '../../tasks/export';
import { ExampleError } from '../../tasks/read-examples';
import { ParsedRegistration } from '../../tasks/register';
import { TaskHeldError } from '../../tasks/store';
import { questionOf } from '../../tasks/task';
import { HttpError, invalid, Problem, ValidationError } from '../../wire/http-error';
import { validate } from '../../wire/validation';

export const TASK_LIMITS = { minExamples: 10, maxExamples: 10_000, minDistinctAnswers: 2 };
/** Problems listed at most: a 10,000-example body could otherwise give a 10,000-line answer. */
const MAX_PROBLEMS = 20;

/** Adds one problem of a request body, at `loc`, to the 422 detail. */
export type AddProblem = (loc: (string | number)[], msg: string, type?: string) => void;

/** The problems found so far, and `bad` adding one (up to MAX_PROBLEMS). */
export function problemList(): { problems: Problem[]; bad: AddProblem } {
  const problems: Problem[] = [];
  return { problems, bad: (loc, msg, type = 'value_error') => void (problems.length < MAX_PROBLEMS && problems.push({ loc: ['body', ...loc], msg, type })) };
}

/** A registration's failure as both routes answer it: a held question 422, a task changed meanwhile 409, an example's failure naming the example. */
export function registrationError(e: unknown): unknown {
  if (e instanceof TaskHeldError) return invalid(['body', 'examples', 0, 'request', 'questions'], e.message);
  if (e instanceof TaskChangedError) return new HttpError(409, e.message);
  if (e instanceof ExampleError) return e.toHttpError();
  return e;
}

/** The option key an answer names, or undefined. */
export function answerKey(type: string, answer: unknown, keys: string[]): string | undefined {
  if (type === 'noul') return answer === true || answer === 'true' ? 'true' : answer === false || answer === 'false' ? 'false' : undefined;
  if (type === 'score') {
    const i = typeof answer === 'number' ? answer : typeof answer === 'string' && /^\d+$/.test(answer) ? Number(answer) : NaN;
    return Number.isInteger(i) && i >= 0 && i < keys.length ? String(i) : undefined;
  }
  return typeof answer === 'string' && keys.includes(answer) ? answer : undefined;
}

export function answerRule(type: string, keys: string[]): string {
  if (type === 'noul') return 'must be true or false';
  if (type === 'score') return `must be a level index from 0 to ${keys.length - 1}`;
  const shown = keys.slice(0, 10).map((k) => JSON.stringify(k)).join(', ');
  return `must be one of the option keys (${shown}${keys.length > 10 ? `, ... ${keys.length} in all` : ''})`;
}

export interface ExampleRules<A> {
  /** Whether an example may carry images. */
  images: boolean;
  /** The question as the task reads it, or why this example's question cannot be used. */
  asked(spec: QuestionSpec): QuestionSpec | string;
  /** The stored answer (`value`) or the rule it breaks (`rule`), given the question as asked and its keys in canonical order. */
  answer(type: QuestionSpec['type'], keys: string[], answer: unknown): { value: A } | { rule: string };
}

export interface ParsedExamples<A> {
  /** The first well-formed example's question as asked: every other example asks it. */
  asked: QuestionSpec;
  /** `images`: the example's images as collected (rules.images only; inspected by the route). */
  examples: { state: unknown; question: WireQuestion; answer: A; images: ImageInput[] }[];
}

/**
 * `body.id` and `body.examples`, checked under `rules`; problems go to `bad`. Undefined when there
 * are problems (the caller adds its own and throws them all).
 */
export function parseExamples<A>(body: Record<string, any>, rules: ExampleRules<A>, { problems, bad }: ReturnType<typeof problemList>): ParsedExamples<A> | undefined {
  if (typeof body.id !== 'string' || !TASK_ID.test(body.id)) bad(['id'], `must be a task id: ${TASK_ID_RULE}`);
  const examples = body.examples;
  const { minExamples, maxExamples } = TASK_LIMITS;
  if (!Array.isArray(examples)) bad(['examples'], 'must be an array of {request, answer}', 'list_type');
  else if (examples.length < minExamples || examples.length > maxExamples) bad(['examples'], `must hold ${minExamples} to ${maxExamples} examples, got ${examples.length}`);
  if (problems.length) return undefined;

  let first: { index: number; asked: QuestionSpec; question: ReturnType<typeof questionOf> } | undefined;
  const parsed: ParsedExamples<A>['examples'] = [];
  for (const [i, example] of (examples as unknown[]).entries()) {
    if (problems.length >= MAX_PROBLEMS) break;
    const at = ['examples', i];
    if (!isObject(example)) {
      bad(at, 'must be an object {request, answer}', 'dict_type');
      continue;
    }
    if (!('answer' in example)) bad([...at, 'answer'], 'missing required field "answer"', 'missing');
    const request = example.request;
    const requestProblems = request === undefined ? [{ loc: ['body'], msg: 'missing required field "request"', type: 'missing' }] : validate('systemone', request);
    if (requestProblems.length) {
      for (const p of requestProblems) bad([...at, 'request', ...p.loc.slice(1)], p.msg, p.type);
      continue;
    }
    const names = Object.keys(request.questions);
    if (names.length !== 1) {
      bad([...at, 'request', 'questions'], `must hold exactly one question, got ${names.length}`);
      continue;
    }
    const found = collectImages(request); // in `images` or inside the state, readable or not
    if (found.images.length + found.problems.length > 0 && !rules.images) bad([...at, 'request', 'images'], 'task examples are text only: no images');
    else for (const p of found.problems) bad([...at, 'request', ...p.loc.slice(1)], p.msg, p.type);
    const question = request.questions[names[0]] as WireQuestion;
    const spec = toSpec(question);
    if (spec.options.length > MAX_OPTIONS) throw new HttpError(400, `example ${i}: ${spec.options.length} options: a question may have at most ${MAX_OPTIONS}`);
    const asked = rules.asked(spec);
    if (typeof asked === 'string') {
      bad([...at, 'request', 'questions', names[0]], asked);
      continue;
    }
    const q = questionOf(asked);
    if (!first) first = { index: i, asked, question: q };
    const f = first.question;
    const differs = [q.type !== f.type && 'type', q.instructions !== f.instructions && 'instructions', q.match_key !== f.match_key && 'options'].filter(Boolean);
    if (differs.length) {
      bad([...at, 'request', 'questions', names[0]], `asks a different question than example ${first.index}: its ${differs.join(' and ')} differ`);
      continue;
    }
    const answer = rules.answer(q.type, q.options.map((o) => o.key), example.answer);
    if ('rule' in answer) bad([...at, 'answer'], `${answer.rule}, got ${JSON.stringify(example.answer) ?? 'nothing'}`);
    else parsed.push({ state: request.state, question, answer: answer.value, images: found.images });
  }
  return problems.length ? undefined : { asked: first!.asked, examples: parsed };
}

const taskRules: ExampleRules<string> = {
  images: false,
  asked: (spec) => spec,
  answer(type, keys, answer) {
    const key = answerKey(type, answer, keys);
    return key === undefined ? { rule: answerRule(type, keys) } : { value: key };
  },
};

export function parseRegistration(body: unknown): ParsedRegistration {
  if (!isObject(body)) throw new ValidationError([{ loc: ['body'], msg: 'must be an object {id, examples}', type: 'dict_type' }]);
  const list = problemList();
  const parsed = parseExamples(body, taskRules, list);
  if (parsed) {
    const distinct = new Set(parsed.examples.map((e) => e.answer)).size;
    if (distinct < TASK_LIMITS.minDistinctAnswers) list.bad(['examples'], `must have at least ${TASK_LIMITS.minDistinctAnswers} distinct answers, got ${distinct}`);
  }
  if (list.problems.length) throw new ValidationError(list.problems);
  return { id: body.id, spec: parsed!.asked, examples: parsed!.examples, raw: body };
}
