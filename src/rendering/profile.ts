/** How questions are rendered to the model: set per base, overridable by start-up flags. */

export interface PromptProfile {
  /** `state-first` shares the rendered state between questions (one forward pass); `question-first` puts the question before the state. */
  layout: 'state-first' | 'question-first';
  /** `chat` uses the checkpoint's chat template (plain when it has none); `plain` writes text only. */
  template: 'chat' | 'plain';
  /** A system turn, or null for none (chat template only). */
  systemTurn: string | null;
  /** `cue`: the prompt ends with "Answer:" and the label is read as the next token (" A"); `turn-start`: read right after the assistant header ("A"). */
  answerPosition: 'cue' | 'turn-start';
  /** Labels of choice options: letters (A, B, ...), digits (0-9, then letters), or the request's own keys when each is one token. */
  choiceLabels: 'letters' | 'digits' | 'keys';
  /** Labels of score levels. */
  scoreLabels: 'letters' | 'digits';
  /** Yes/no questions: the words Yes/No as labels, or lettered options A. Yes / B. No. */
  yesNo: 'words' | 'letters';
  /** The option list after the question's instructions, or before them: questions about one state that
   *  share an option list then begin with the same text, which the engine computes once. */
  optionsPosition: 'after' | 'before';
}

export const defaultProfile: PromptProfile = {
  layout: 'state-first',
  template: 'chat',
  systemTurn: 'You answer questions about the text in <state>. Reply with the label of one option.',
  answerPosition: 'cue',
  choiceLabels: 'letters',
  scoreLabels: 'digits',
  yesNo: 'words',
  optionsPosition: 'after',
};

export type QuestionType = 'noul' | 'choice' | 'score';
export type Temperatures = Record<QuestionType, number>;
