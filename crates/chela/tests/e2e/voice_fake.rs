//! The testkit's fake OpenAI audio API, checked against the official `openai` Python SDK: its
//! transcription and speech calls parse the fake's answers into the SDK's own types, so the
//! fake the voice tests rely on speaks the real wire format.

use std::path::{Path, PathBuf};
use std::process::Command;

use chela_testkit::audio::{FakeAudio, MS_PER_CHAR, SPEECH_RATE};

fn openai_python() -> PathBuf {
    chela_testkit::peers::openai_python(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

const SDK_SCRIPT: &str = r#"
import io, sys, wave, openai
c = openai.OpenAI(base_url=sys.argv[1], api_key="sk-audio", max_retries=0, timeout=20)
buf = io.BytesIO()
w = wave.open(buf, "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
w.writeframes(b"\x00\x01" * 16000); w.close()
wav = buf.getvalue()
t = c.audio.transcriptions.create(model="whisper-1", file=("speech.wav", wav, "audio/wav"), response_format="json")
assert isinstance(t, openai.types.audio.Transcription), type(t)
print("JSON=" + t.text)
plain = c.audio.transcriptions.create(model="whisper-1", file=("speech.wav", wav, "audio/wav"), response_format="text")
print("TEXT=" + str(plain).strip())
pcm = c.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.", response_format="pcm").read()
print("PCM=%d" % len(pcm))
r = wave.open(io.BytesIO(c.audio.speech.create(model="tts-1", voice="alloy", input="Hello there.", response_format="wav").read()))
print("WAV=%d,%d,%d,%d" % (r.getframerate(), r.getnchannels(), r.getsampwidth(), r.getnframes()))
try:
    c.audio.speech.create(model="tts-1", voice="alloy", input="Hello.", response_format="mp3")
except openai.BadRequestError as e:
    print("MP3=%d" % e.status_code)
bad = openai.OpenAI(base_url=sys.argv[1], api_key="wrong", max_retries=0, timeout=20)
try:
    bad.audio.speech.create(model="tts-1", voice="alloy", input="Hello.", response_format="pcm")
except openai.AuthenticationError as e:
    print("AUTH=%d" % e.status_code)
"#;

#[test]
fn the_openai_sdk_reads_the_fake_audio_api() {
    let python = openai_python();
    let fake = FakeAudio::start("hello from the fake");
    fake.require_key("sk-audio");
    fake.push_transcript("first answer");
    let out = Command::new(python).args(["-c", SDK_SCRIPT, &fake.base_url()]).output().expect("cannot run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let samples = SPEECH_RATE as usize * MS_PER_CHAR as usize * "Hello there.".len() / 1000;
    let expected = format!(
        "JSON=first answer\nTEXT=hello from the fake\nPCM={}\nWAV=24000,1,2,{samples}\nMP3=400\nAUTH=401\n",
        samples * 2
    );
    assert_eq!(stdout, expected);
    let calls = fake.calls();
    assert_eq!(calls[0].path, "/v1/audio/transcriptions");
    assert!(calls[0].file_is_wav);
    assert_eq!(calls[0].fields["model"], "whisper-1");
    assert_eq!(calls[0].file_bytes, Some(44 + 32_000));
}
