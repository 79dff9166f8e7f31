// What an attacker writes into a value that may reach a shell: shell syntax, quotes, newlines and
// look-alikes of each (HOSTILE, which the `trust` tests plant), and what the kubelet itself reads
// in a container's command, args and env values: $(NAME) references and their $$ escapes
// (KUBELET_HOSTILE). A test plants each in every field it judges.

export const HOSTILE: readonly string[] = [
  '$(touch pwned)',
  '`touch pwned`',
  'x; touch pwned',
  'x | touch pwned',
  "x' ; touch pwned ; '",
  'x" ; touch pwned ; "',
  'x\ntouch pwned',
  'x\r\ntouch pwned #',
  '$(echo > pwned)',
  '${IFS}touch${IFS}pwned',
  'x && touch pwned',
  '＄（touch pwned）', // fullwidth look-alikes
  'x\u2028touch pwned',
  'x\u202etouch pwned',
  '\u2018; touch pwned; \u2019',
];

/** HOSTILE and the rest of the shell's and the kubelet's syntax. */
export const KUBELET_HOSTILE: readonly string[] = [
  ...HOSTILE,
  'x;id>F;#', // issue 28's provider suffix
  'x & touch pwned',
  'x > pwned',
  'x\ttouch pwned',
  '*',
  'x?',
  '[a-z]',
  '~root',
  '{a,b}',
  'x\\',
  '$(CLOUDSDK_CONFIG)', // a variable the setup container has: the kubelet expands it
  '$(GCP_SERVICE_ACCOUNT)',
  '$$(touch pwned)', // the kubelet's escape, then a shell's command substitution
  '$$$(CLOUDSDK_CONFIG)',
  '$(',
  '$HOME',
  "'",
  '"',
  '#',
  '!',
];
