/** RFC 6901: `~` is `~0` and `/` is `~1`, in that order. */
export function escapePointerToken(token: string): string {
  if (!token.includes('~') && !token.includes('/')) return token;
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}
