/** Texts for tests: real sentences, tokenized by each model's real tokenizer. */
export const stateText =
  'The warehouse in Rotterdam received 42 pallets of coffee on Monday. Two were damaged by water, ' +
  'and the insurer asked for photographs before Friday. The manager, Ms. Okafor, approved a refund for ' +
  'the customer in Lyon but not for the one in Porto, whose order arrived on time and intact.';
export const questionTexts = [
  '\nQuestion: Was any pallet damaged?\nAnswer:',
  '\nQuestion: Which city got a refund? A) Lyon B) Porto C) Rotterdam\nAnswer:',
  '\nQuestion: How urgent is the insurer request, from 0 to 4?\nAnswer:',
  '\nQuestion: Did the manager approve every refund?\nAnswer:',
];
export const labelTexts = [' A', ' B', ' C', ' D', ' Yes', ' No'];

/** A state of about `tokens` tokens (" a" is one token in the test tokenizers), unique per `tag` so that no cached prefix shortens it. */
export function longState(tag: string, tokens: number): string {
  return `${tag}:` + ' a'.repeat(tokens);
}
