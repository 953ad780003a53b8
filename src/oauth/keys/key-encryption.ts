import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Private signing keys are stored encrypted with AES-256-GCM. The 256-bit encryption key is derived with
 * HKDF-SHA256 (RFC 5869) from KEY_ENCRYPTION_SECRET; the config requires that secret to be at least 32
 * characters and it is meant to be random, so a fast KDF is enough (a slow one would only protect a
 * human-chosen passphrase). Each record gets a fresh 96-bit nonce; the key id is bound in as additional
 * authenticated data, so a ciphertext copied onto another row does not decrypt.
 *
 * Stored form: `v1.<nonce>.<ciphertext>.<tag>`, each part base64url.
 */
const VERSION = 'v1';
const HKDF_SALT = 'portcullis/signing-keys';
const HKDF_INFO = 'AES-256-GCM private JWK encryption v1';

export class KeyDecryptionError extends Error {
  constructor(readonly kid: string) {
    super(`The private part of signing key ${kid} cannot be decrypted: is KEY_ENCRYPTION_SECRET the one it was stored with? (To change it, set the old one in PREVIOUS_KEY_ENCRYPTION_SECRET and run "keys rewrap"; see the README.)`);
    this.name = 'KeyDecryptionError';
  }
}

export function deriveEncryptionKey(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, HKDF_SALT, HKDF_INFO, 32));
}

/**
 * What stored private keys are encrypted under while KEY_ENCRYPTION_SECRET is being replaced: new records
 * under the current secret's key, existing ones under it or, until `keys rewrap` has re-encrypted them,
 * under the previous secret's.
 */
export interface KeyEncryptionKeys {
  current: Buffer;
  previous: Buffer | null;
}

export function encryptionKeysFrom(secrets: { keyEncryptionSecret: string; previousKeyEncryptionSecret: string | null }): KeyEncryptionKeys {
  const { keyEncryptionSecret, previousKeyEncryptionSecret } = secrets;
  return {
    current: deriveEncryptionKey(keyEncryptionSecret),
    previous: previousKeyEncryptionSecret === null ? null : deriveEncryptionKey(previousKeyEncryptionSecret),
  };
}

/** Decrypts under the current key, else the previous one; KeyDecryptionError when neither fits. */
export function decryptStoredJwk(stored: string, kid: string, keys: KeyEncryptionKeys): Record<string, unknown> {
  try {
    return decryptPrivateJwk(stored, kid, keys.current);
  } catch (error) {
    if (keys.previous === null) throw error;
    return decryptPrivateJwk(stored, kid, keys.previous);
  }
}

export function encryptPrivateJwk(jwk: object, kid: string, key: Buffer): string {
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(Buffer.from(kid, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(JSON.stringify(jwk), 'utf8'), cipher.final()]);
  return [VERSION, ...[nonce, ciphertext, cipher.getAuthTag()].map((part) => part.toString('base64url'))].join('.');
}

export function decryptPrivateJwk(stored: string, kid: string, key: Buffer): Record<string, unknown> {
  const [version, nonce, ciphertext, tag, ...rest] = stored.split('.');
  if (version !== VERSION || !nonce || !ciphertext || !tag || rest.length > 0) throw new KeyDecryptionError(kid);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64url'));
    decipher.setAAD(Buffer.from(kid, 'utf8'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    const plaintext = Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]);
    return JSON.parse(plaintext.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw new KeyDecryptionError(kid);
  }
}
