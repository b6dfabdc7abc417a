/**
 * Abstain options before the tasks (the pipeline's Abstentions step). For a choice or yes/no
 * question, in this order:
 *   1. an abstention task that matches it and whose threshold is justified: the task's abstain
 *      option (the request's own key, or its text appended) and, while --abstention is on, its
 *      threshold;
 *   2. --abstain-option TEXT: the text appended as an option (a request that already has an
 *      option with that key keeps it as its abstain option), and the default rule;
 *   3. otherwise no abstain option: the question is asked as sent.
 * --abstention off changes only the decision: the question is asked exactly as when on (the
 * same abstain option, so the same prompt, tasks and probabilities), and the default rule
 * decides `abstained` in place of the threshold. A task whose threshold is not justified is
 * passed over either way, so the question is asked as without it. Score questions have no
 * abstain option.
 */
import { Abstentions, QuestionAbstention } from '../../answering/context';
import { QuestionSpec } from '../../rendering/renderer';
import { questionOf } from '../task';
import { AbstentionTask, abstainKeyOf, askedMatchKey, withAbstainOption } from './task';

export class AbstentionBook implements Abstentions {
  /** Applied tasks of this book's route by the match key of the question as asked (abstain option included). */
  private byAsked = new Map<string, AbstentionTask>();
  /** Applied append tasks by the match key of the option set the server appends to. */
  private byOptionSet = new Map<string, AbstentionTask>();

  constructor(
    /** --abstention: whether the thresholds decide; off, the default rule decides, the questions asked the same. */
    public enabled: boolean,
    /** --abstain-option: the text of the option appended to every choice and yes/no question, or undefined. */
    readonly defaultOption?: string,
    /** The tasks this book applies: the text route's (option_set) or the image route's (imajev_extension). */
    readonly match: AbstentionTask['match'] = 'option_set',
  ) {}

  set(tasks: Iterable<AbstentionTask>) {
    const applied = [...tasks].filter((t) => t.applied && t.threshold !== null && t.match === this.match);
    this.byAsked = new Map(applied.map((t) => [askedMatchKey(t), t]));
    this.byOptionSet = new Map(applied.filter((t) => 'append' in t.option).map((t) => [t.match_key, t]));
  }

  abstentionFor(spec: QuestionSpec): QuestionAbstention | undefined {
    if (spec.type === 'score') return undefined;
    if (this.byAsked.size) {
      const key = questionOf(spec).match_key;
      const task = this.byAsked.get(key) ?? this.byOptionSet.get(key);
      const asked = task && withAbstainOption(spec, task.option);
      const threshold = task && this.enabled ? { task: task.id, value: task.threshold!, fittedWith: task.fitted_with } : undefined;
      if (task && asked) return { asked, key: abstainKeyOf(task.option), appended: asked !== spec, threshold };
    }
    const asked = this.defaultOption === undefined ? undefined : withAbstainOption(spec, { append: this.defaultOption });
    return asked && { asked, key: this.defaultOption!, appended: asked !== spec };
  }
}
