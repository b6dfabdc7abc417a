/** The base's prompt profile and temperatures with the start-up flags applied. */
import { PromptProfile, Temperatures } from '../rendering/profile';
import { Flags } from './flags';

export function promptProfile(base: PromptProfile, f: Flags): PromptProfile {
  const system = f['system-turn'] as string | undefined;
  return {
    layout: (f.layout as PromptProfile['layout']) ?? base.layout,
    template: (f.template as PromptProfile['template']) ?? base.template,
    systemTurn: system === undefined ? base.systemTurn : system === 'none' || system === '' ? null : system,
    answerPosition: (f['answer-position'] as PromptProfile['answerPosition']) ?? base.answerPosition,
    choiceLabels: (f['choice-labels'] as PromptProfile['choiceLabels']) ?? base.choiceLabels,
    scoreLabels: (f['score-labels'] as PromptProfile['scoreLabels']) ?? base.scoreLabels,
    yesNo: (f['yes-no'] as PromptProfile['yesNo']) ?? base.yesNo,
    optionsPosition: (f['options-position'] as PromptProfile['optionsPosition']) ?? base.optionsPosition,
  };
}

export function temperaturesOf(base: Temperatures, f: Flags): Temperatures {
  return {
    noul: (f['temperature-noul'] as number | undefined) ?? base.noul,
    choice: (f['temperature-choice'] as number | undefined) ?? base.choice,
    score: (f['temperature-score'] as number | undefined) ?? base.score,
  };
}
