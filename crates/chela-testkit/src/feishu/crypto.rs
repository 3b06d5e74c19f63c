//! What Feishu does to a webhook event when the app has an encrypt key, written from the open
//! platform's documentation: AES-256-CBC with key SHA-256(encrypt_key), a random IV sent as the
//! first 16 bytes, PKCS#7 padding, all base64; and the `X-Lark-Signature` header,
//! hex(SHA-256(timestamp + nonce + encrypt_key + body)).

use aes::cipher::{BlockEncryptMut, KeyIvInit, block_padding::Pkcs7};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::digest::{SHA256, digest};

/// `{"encrypt": …}`'s value for `plaintext`, with the IV given (tests pick it).
pub fn encrypt(encrypt_key: &str, iv: [u8; 16], plaintext: &[u8]) -> String {
    let key = digest(&SHA256, encrypt_key.as_bytes());
    let cipher = cbc::Encryptor::<aes::Aes256>::new_from_slices(key.as_ref(), &iv).expect("32-byte key, 16-byte iv");
    let mut out = iv.to_vec();
    out.extend_from_slice(&cipher.encrypt_padded_vec_mut::<Pkcs7>(plaintext));
    STANDARD.encode(out)
}

/// The `X-Lark-Signature` of a webhook request.
pub fn signature(timestamp: &str, nonce: &str, encrypt_key: &str, body: &[u8]) -> String {
    let mut input = Vec::with_capacity(timestamp.len() + nonce.len() + encrypt_key.len() + body.len());
    input.extend_from_slice(timestamp.as_bytes());
    input.extend_from_slice(nonce.as_bytes());
    input.extend_from_slice(encrypt_key.as_bytes());
    input.extend_from_slice(body);
    digest(&SHA256, &input).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}
