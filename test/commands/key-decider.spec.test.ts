import { expect } from 'chai';
import { AlreadyExistsError, KeyNotFoundError } from '../../commands/errors.ts';
import { keyDecider, type KeyCommand } from '../../commands/key/key-decider.ts';
import { deciderSpec, recorded } from '../support/decider-spec.ts';

const meta = { actor: { kind: 'operator' as const, id: 'op' }, correlationId: 'c' };
const issued = recorded('ApiKeyIssued', { name: 'ci', scope: 'write', secret_hash: 'h' });
const issue: KeyCommand = { type: 'IssueKey', workspaceId: 'ws', keyId: 'k1', name: 'ci', scope: 'read', secretHash: 'hash', meta };
const revoke: KeyCommand = { type: 'RevokeKey', workspaceId: 'ws', keyId: 'k1', meta };

describe('key decider (specs)', () => {
  const spec = deciderSpec(keyDecider);
  it('issues a key with its scope and secret hash', () => spec.given([]).when(issue).then([{ type: 'ApiKeyIssued', data: { scope: 'read', secret_hash: 'hash' } }]));
  it('refuses to issue the same key id twice', () => spec.given([issued]).when(issue).thenThrows(AlreadyExistsError));
  it('revokes an issued key', () => spec.given([issued]).when(revoke).then([{ type: 'ApiKeyRevoked' }]));
  it('revoking twice appends nothing', () => spec.given([issued, recorded('ApiKeyRevoked', {})]).when(revoke).thenNothing());
  it('refuses to revoke an unknown key', () => spec.given([]).when(revoke).thenThrows(KeyNotFoundError));
  it('decides on the key’s subject, at workspace level', () => {
    expect(keyDecider.streamOf(revoke)).to.deep.equal({ workspaceId: 'ws', accountId: null, aggregate: { type: 'key', id: 'k1' } });
  });
});
