/**
 * Abstention tasks in the tasks' full form (GET /v1/tasks?full=1's `abstention_tasks`, POST
 * /v1/tasks/import, --tasks-file): the stored form itself, all JSON. Parsing checks every field
 * the server applies (the option set against its match key, the abstain option, the threshold)
 * so a malformed import is refused whole before anything is stored.
 */
import { MAX_OPTIONS } from '../../rendering/labels';
import { checkOpening, checkProvenance, FormProblem, isObject, problemsAt, provenanceOf } from '../export';
import { matchKeyOf } from '../task';
import { AbstentionTask, MATCH_MODES } from './task';

const isOption = (o: unknown) => isObject(o) && typeof o.key === 'string' && (typeof o.description === 'string' || o.description === null);

/** An abstention task's summary: all of it but the fingerprint's components. */
export function abstentionSummaryOf(t: AbstentionTask) {
  const { fingerprint_components: _f, ...rest } = t;
  return rest;
}

/** The record says whether the threshold applies, and why not when it does not (an older or hand-written export may not). */
function explainedThreshold(record: Record<string, any>, applied: boolean): AbstentionTask['record'] {
  const { reason, ...rest } = record;
  return { ...rest, applied, ...(applied ? {} : { reason: typeof reason === 'string' && reason ? reason : 'not justified (the imported record gives no reason)' }) } as AbstentionTask['record'];
}

export function parseAbstentionTask(v: unknown, loc: (string | number)[]): { task?: AbstentionTask; problems: FormProblem[] } {
  const { problems, bad } = problemsAt(loc);
  if (!isObject(v)) return { problems: [{ loc, msg: 'must be an object (an abstention task in the full form of GET /v1/tasks?full=1)' }] };
  checkOpening(v, ['noul', 'choice'], bad);
  if (!MATCH_MODES.includes(v.match)) bad(['match'], `must be one of ${MATCH_MODES.map((m) => `"${m}"`).join(', ')}`);
  const o = v.option;
  const oneOf = isObject(o) && (typeof o.key === 'string') !== (typeof o.append === 'string');
  if (!oneOf) bad(['option'], 'must be {key: string} or {append: string}');
  if (!isOption(v.abstain_option)) bad(['abstain_option'], 'must be {key: string, description: string or null}');
  else if (oneOf && v.abstain_option.key !== (o.key ?? o.append)) bad(['abstain_option', 'key'], "must be the option's key or appended text");
  const options = v.options;
  if (!Array.isArray(options) || options.length < 1 || options.length >= MAX_OPTIONS || !options.every(isOption)) bad(['options'], `must be an array of 1 to ${MAX_OPTIONS - 1} options {key, description}`);
  else if (v.match_key !== matchKeyOf(v.type, options)) bad(['match_key'], 'does not match the type and options');
  const threshold = v.threshold;
  if (typeof v.applied !== 'boolean') bad(['applied'], 'must be a boolean');
  else if (v.applied ? !(typeof threshold === 'number' && threshold >= 0 && threshold <= 1) : threshold !== null) bad(['threshold'], 'must be a number from 0 to 1 when applied, else null');
  if (!(v.fitted_with === null || typeof v.fitted_with === 'string')) bad(['fitted_with'], 'must be a string or null');
  checkProvenance(v, bad);
  if (problems.length) return { problems };
  const task: AbstentionTask = {
    id: v.id,
    type: v.type,
    instructions: v.instructions,
    match: v.match,
    option: typeof o.key === 'string' ? { key: o.key } : { append: o.append },
    abstain_option: { key: v.abstain_option.key, description: v.abstain_option.description },
    options: options.map((x: any) => ({ key: x.key, description: x.description })),
    match_key: v.match_key,
    threshold,
    applied: v.applied,
    fitted_with: v.fitted_with,
    record: explainedThreshold(v.record, v.applied),
    ...provenanceOf(v),
  };
  return { task, problems };
}
