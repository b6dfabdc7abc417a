/**
 * POST /v1/abstention/tasks's body (docs/abstention.md): `{id, option, match, examples}`,
 * checked whole before any engine work, with the tasks' example rules (task-body.ts) and:
 *   - `option`: exactly one of `key` (a non-empty string: the requests' own option) and
 *     `append` (a non-blank string: the text of the option the server adds);
 *   - `match`: "option_set" (the default), whose examples are text, or "imajev_extension", whose
 *     examples must each carry images (read by the image engine);
 *   - choice or yes/no questions only; `key` only for choice, present in every example;
 *   - each answer an option key, or null when unanswerable (the abstain key counts as null);
 *   - at least 10 unanswerable and 10 answerable examples (THRESHOLD_RULE.minEach).
 * Examples with images need the image engine: the route answers 400 naming the flag while there is none.
 */
import { THRESHOLD_RULE } from '../../tasks/abstention/fit';
import { ParsedAbstention } from '../../tasks/abstention/register';
import { AbstainOption, abstainKeyOf, MATCH_MODES, MatchMode, withAbstainOption } from '../../tasks/abstention/task';
import { ValidationError } from '../../wire/http-error';
import { isObject } from '../../tasks/export';
import { answerKey, answerRule, AddProblem, ExampleRules, parseExamples, problemList } from './task-body';

function parseOption(v: unknown, bad: AddProblem): AbstainOption | undefined {
  const rule = 'must be {"key": <the requests\' own abstain key>} or {"append": <text of the option the server adds>}';
  if (!isObject(v)) return void bad(['option'], rule, v === undefined ? 'missing' : 'dict_type');
  const hasKey = 'key' in v, hasAppend = 'append' in v;
  if (hasKey === hasAppend) return void bad(['option'], `${rule}: ${hasKey ? 'not both' : 'neither was given'}`);
  if (hasKey) {
    if (typeof v.key !== 'string' || v.key === '') return void bad(['option', 'key'], 'must be a non-empty string: an option key of the requests');
    return { key: v.key };
  }
  if (typeof v.append !== 'string' || !v.append.trim()) return void bad(['option', 'append'], 'must be a non-blank string: the text of the option the server adds');
  return { append: v.append };
}

function abstentionRules(option: AbstainOption): ExampleRules<string | null> {
  const abstainKey = abstainKeyOf(option);
  return {
    images: true,
    asked(spec) {
      if (spec.type === 'score') return 'abstention applies to choice and yes/no questions, not to score questions';
      if ('key' in option && spec.type === 'noul') return 'a yes/no question has no option of its own to abstain with: use {"append": <text>}';
      return withAbstainOption(spec, option) ?? (spec.type === 'noul' ? `a yes/no question cannot abstain with an option named ${JSON.stringify(abstainKey)}` : `the abstain key ${JSON.stringify(abstainKey)} is not among this question's options`);
    },
    answer(type, keys, answer) {
      if (answer === null || answer === abstainKey) return { value: null };
      const key = answerKey(type, answer, keys);
      if (key === undefined) return { rule: `${answerRule(type, keys.filter((k) => k !== abstainKey))}, or null (unanswerable)` };
      return { value: key === abstainKey ? null : key };
    },
  };
}

export function parseAbstentionRegistration(body: unknown): ParsedAbstention {
  if (!isObject(body)) throw new ValidationError([{ loc: ['body'], msg: 'must be an object {id, option, match, examples}', type: 'dict_type' }]);
  const list = problemList();
  const option = parseOption(body.option, list.bad);
  const match = (body.match ?? 'option_set') as MatchMode;
  if (!MATCH_MODES.includes(match)) list.bad(['match'], `must be one of ${MATCH_MODES.map((m) => `"${m}"`).join(', ')}, got ${JSON.stringify(body.match)}`);
  const parsed = option && !list.problems.length ? parseExamples(body, abstentionRules(option), list) : undefined;
  if (parsed) {
    const unanswerable = parsed.examples.filter((e) => e.answer === null).length;
    const answerable = parsed.examples.length - unanswerable;
    const { minEach } = THRESHOLD_RULE;
    const nullKey = `null or ${JSON.stringify(abstainKeyOf(option!))}`;
    if (unanswerable < minEach) list.bad(['examples'], `must have at least ${minEach} unanswerable examples (answer ${nullKey}), got ${unanswerable}`);
    if (answerable < minEach) list.bad(['examples'], `must have at least ${minEach} answerable examples (answer an option key), got ${answerable}`);
    parsed.examples.forEach((e, i) => {
      if (match === 'imajev_extension' && !e.images.length) list.bad(['examples', i, 'request', 'images'], 'imajev_extension examples use the image extension of the format: each must carry images');
      if (match === 'option_set' && e.images.length) list.bad(['examples', i, 'request', 'images'], 'option_set examples are text questions (the text route): examples with images need match "imajev_extension"');
    });
  }
  if (list.problems.length) throw new ValidationError(list.problems);
  return { id: body.id, option: option!, match, asked: parsed!.asked, examples: parsed!.examples, raw: body };
}
