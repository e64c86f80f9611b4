// A real OpenID Connect provider for the sign-in tests: panva's certified oidc-provider
// with its development login and consent pages (any password). The test fixture writes the
// config (clients, the signing key it keeps to mint forged and expired tokens, the users'
// claims) and reads the first line, "listening <url>", before it signs anyone in.
import fs from 'node:fs';
import Provider from 'oidc-provider';

const [configPath] = process.argv.slice(2);
const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
const users = config.users;

const provider = new Provider(config.issuer, {
  clients: config.clients,
  jwks: { keys: [config.signing_key] },
  pkce: { required: () => true },
  scopes: ['openid', 'email', 'profile', 'groups', 'offline_access'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
  // the claims in the ID token itself, as Dex puts them there
  conformIdTokenClaims: false,
  ttl: { IdToken: config.id_token_ttl || 300 },
  async findAccount(ctx, id) {
    const user = users[id] || { email: `${id}@example.com`, groups: [] };
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: user.email, email_verified: true, groups: user.groups };
      },
    };
  },
});
provider.proxy = false;
const url = new URL(config.issuer);
const server = provider.listen(Number(url.port), url.hostname, () => {
  console.log(`listening ${config.issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
