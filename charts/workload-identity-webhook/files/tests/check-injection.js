// `helm test`: proves that the release injects. Run with `node -e` in the webhook's image, in a
// Pod of a ServiceAccount that asks for AWS role ROLE_ARN: exit 0 when the webhook injected that
// role and a projected token for AUDIENCE whose subject is SUBJECT, 1 with what is missing. It
// reads only its own environment and token file (no API access) and never prints the token.
const { readFileSync } = require('node:fs');
const [role, audience, subject] = process.argv.slice(1);
const problems = [];
if (process.env.AWS_ROLE_ARN !== role)
  problems.push(`AWS_ROLE_ARN is ${JSON.stringify(process.env.AWS_ROLE_ARN)}, not ${role}`);
const file = process.env.AWS_WEB_IDENTITY_TOKEN_FILE;
if (!file) problems.push('AWS_WEB_IDENTITY_TOKEN_FILE is not set');
else {
  let claims;
  try {
    claims = JSON.parse(Buffer.from(readFileSync(file, 'utf8').trim().split('.')[1] ?? '', 'base64url').toString());
  } catch (err) {
    problems.push(`${file} holds no token: ${err.code ?? err.message}`);
  }
  if (claims) {
    const aud = [claims.aud].flat();
    if (!aud.includes(audience)) problems.push(`the token's audience is ${JSON.stringify(aud)}, not ${audience}`);
    if (claims.sub !== subject) problems.push(`the token's subject is ${JSON.stringify(claims.sub)}, not ${subject}`);
  }
}
for (const p of problems) console.log(`FAIL ${p}`);
if (problems.length === 0) console.log(`ok: ${subject} got ${role} and a token for ${audience} in ${file}`);
process.exitCode = problems.length === 0 ? 0 : 1;
