//! The few D-Bus calls nodectl makes to systemd, peer to peer, on a
//! connection it opened and checked itself (see [`crate::act::systemd`]).
//!
//! Why not a D-Bus crate: zbus 5 (5.19, and its main branch) takes the
//! sender field of every incoming message for a unique name (`:1.x`, or
//! `org.freedesktop.DBus`), and systemd's peer-to-peer replies carry
//! `org.freedesktop.systemd1` there (sd-bus fills it on a direct
//! connection): zbus's reader panics ("Invalid field reconstruction",
//! z-galaxy/zbus#1497, open) and the call never returns. Measured here with
//! systemd 252: StopUnit was carried out, its reply was lost.
//!
//! So the wire format is written here, for what is needed only: EXTERNAL
//! authentication, method calls whose arguments are strings, and replies
//! whose first value is a string, an object path or a variant holding one
//! (the D-Bus specification's "Message Format"). Every read is bounded in
//! size and by the caller's deadline; signals are skipped.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::Instant;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// A reply larger than this is not systemd's answer to these calls (a
/// unit's path or state is tens of bytes).
const MAX_MESSAGE: usize = 1 << 20;

/// Header field codes (the specification's "Header Fields").
const PATH: u8 = 1;
const INTERFACE: u8 = 2;
const MEMBER: u8 = 3;
const ERROR_NAME: u8 = 4;
const REPLY_SERIAL: u8 = 5;
const DESTINATION: u8 = 6;
const SIGNATURE: u8 = 8;

const METHOD_RETURN: u8 = 2;
const ERROR: u8 = 3;

/// An authenticated peer-to-peer connection.
pub struct Connection {
    stream: UnixStream,
    serial: u32,
    deadline: Instant,
    received: Vec<u8>,
}

/// What a method call got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Its body's signature and bytes (the body starts 8-aligned).
    Return { signature: String, body: Vec<u8> },
    /// The error's name and message.
    Error { name: String, message: String },
}

impl Connection {
    /// EXTERNAL authentication on `stream` (non-blocking) as nodectl's own
    /// uid, all within `deadline`.
    pub fn authenticate(stream: UnixStream, deadline: Instant) -> Result<Connection, String> {
        let mut connection = Connection {
            stream,
            serial: 0,
            deadline,
            received: Vec::new(),
        };
        let uid = nix::unistd::getuid().as_raw().to_string();
        let hex: String = uid.bytes().map(|b| format!("{b:02x}")).collect();
        connection.send(format!("\0AUTH EXTERNAL {hex}\r\n").as_bytes())?;
        let line = connection.line()?;
        if !line.starts_with("OK ") {
            return Err(format!("authentication refused: {}", line.trim_end()));
        }
        connection.send(b"BEGIN\r\n")?;
        Ok(connection)
    }

    /// Calls `member` of `interface` on `path` at `destination` with
    /// string arguments; skips whatever else arrives before its reply.
    pub fn call(
        &mut self,
        destination: &str,
        path: &str,
        interface: &str,
        member: &str,
        args: &[&str],
    ) -> Result<Reply, String> {
        self.serial += 1;
        let message = method_call(self.serial, destination, path, interface, member, args);
        self.send(&message)?;
        loop {
            let message = self.message()?;
            let parsed = parse(&message)?;
            if parsed.reply_serial != Some(self.serial) {
                continue;
            }
            return match parsed.kind {
                METHOD_RETURN => Ok(Reply::Return {
                    signature: parsed.signature,
                    body: parsed.body,
                }),
                ERROR => Ok(Reply::Error {
                    message: first_string(&parsed.signature, &parsed.body, parsed.little)
                        .unwrap_or_default(),
                    name: parsed.error_name.unwrap_or_default(),
                }),
                other => Err(format!("a reply of message type {other}")),
            };
        }
    }

    fn wait(&self, flags: PollFlags) -> Result<(), String> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("no answer before the deadline".to_string());
        }
        let millis = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(self.stream.as_fd(), flags)];
        match poll(&mut fds, PollTimeout::from(millis)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
            Err(e) => Err(format!("poll: {}", e.desc())),
        }
    }

    fn send(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        while !bytes.is_empty() {
            match self.stream.write(bytes) {
                Ok(0) => return Err("the connection closed".to_string()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(PollFlags::POLLOUT)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("writing: {e}")),
            }
        }
        Ok(())
    }

    /// Reads until `received` holds at least `wanted` bytes.
    fn fill(&mut self, wanted: usize) -> Result<(), String> {
        let mut chunk = [0u8; 4096];
        while self.received.len() < wanted {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("the connection closed".to_string()),
                Ok(n) => self.received.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait(PollFlags::POLLIN)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading: {e}")),
            }
        }
        Ok(())
    }

    /// One line of the authentication exchange.
    fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(end) = self.received.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.received.drain(..end + 2).collect();
                return Ok(String::from_utf8_lossy(&line).into_owned());
            }
            if self.received.len() > 4096 {
                return Err("an authentication line too long".to_string());
            }
            let wanted = self.received.len() + 1;
            self.fill(wanted)?;
        }
    }

    /// One whole message.
    fn message(&mut self) -> Result<Vec<u8>, String> {
        self.fill(16)?;
        let little = match self.received[0] {
            b'l' => true,
            b'B' => false,
            other => return Err(format!("a message of unknown byte order {other:#x}")),
        };
        let body = u32_at(&self.received, 4, little) as usize;
        let fields = u32_at(&self.received, 12, little) as usize;
        let total = align(16 + fields, 8) + body;
        if total > MAX_MESSAGE {
            return Err(format!("a message of {total} bytes"));
        }
        self.fill(total)?;
        Ok(self.received.drain(..total).collect())
    }
}

fn align(offset: usize, to: usize) -> usize {
    offset.div_ceil(to) * to
}

fn u32_at(bytes: &[u8], at: usize, little: bool) -> u32 {
    let four = [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
    match little {
        true => u32::from_le_bytes(four),
        false => u32::from_be_bytes(four),
    }
}

fn pad(out: &mut Vec<u8>, to: usize) {
    out.resize(align(out.len(), to), 0);
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    pad(out, 4);
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    out.push(0);
}

/// A header field: (code, variant of `kind` holding `value`).
fn put_field(out: &mut Vec<u8>, code: u8, kind: u8, value: &str) {
    pad(out, 8);
    out.extend_from_slice(&[code, 1, kind, 0]);
    match kind {
        b'g' => {
            out.push(value.len() as u8);
            out.extend_from_slice(value.as_bytes());
            out.push(0);
        }
        _ => put_string(out, value),
    }
}

/// A method call (little-endian) with string arguments.
fn method_call(
    serial: u32,
    destination: &str,
    path: &str,
    interface: &str,
    member: &str,
    args: &[&str],
) -> Vec<u8> {
    let mut body = Vec::new();
    for arg in args {
        put_string(&mut body, arg);
    }
    let mut message = vec![b'l', 1, 0, 1];
    message.extend_from_slice(&(body.len() as u32).to_le_bytes());
    message.extend_from_slice(&serial.to_le_bytes());
    message.extend_from_slice(&[0; 4]);
    put_field(&mut message, PATH, b'o', path);
    put_field(&mut message, DESTINATION, b's', destination);
    put_field(&mut message, INTERFACE, b's', interface);
    put_field(&mut message, MEMBER, b's', member);
    if !args.is_empty() {
        put_field(&mut message, SIGNATURE, b'g', &"s".repeat(args.len()));
    }
    let fields = (message.len() - 16) as u32;
    message[12..16].copy_from_slice(&fields.to_le_bytes());
    pad(&mut message, 8);
    message.extend_from_slice(&body);
    message
}

struct Parsed {
    kind: u8,
    little: bool,
    reply_serial: Option<u32>,
    error_name: Option<String>,
    signature: String,
    body: Vec<u8>,
}

/// Reads a string (`s`, `o`: 4-aligned length, bytes, NUL) at `*at`, or a
/// signature (`g`: one-byte length).
fn read_string(bytes: &[u8], at: &mut usize, kind: u8, little: bool) -> Result<String, String> {
    let short = || "a truncated message".to_string();
    let len = match kind {
        b'g' => {
            let len = *bytes.get(*at).ok_or_else(short)? as usize;
            *at += 1;
            len
        }
        _ => {
            *at = align(*at, 4);
            if *at + 4 > bytes.len() {
                return Err(short());
            }
            let len = u32_at(bytes, *at, little) as usize;
            *at += 4;
            len
        }
    };
    let text = bytes.get(*at..*at + len).ok_or_else(short)?;
    *at += len + 1;
    Ok(String::from_utf8_lossy(text).into_owned())
}

/// A whole message (see [`Connection::message`]) taken apart.
fn parse(message: &[u8]) -> Result<Parsed, String> {
    if message.len() < 16 {
        return Err("a truncated header".to_string());
    }
    let little = message[0] == b'l';
    let kind = message[1];
    let fields_end = 16 + u32_at(message, 12, little) as usize;
    let mut parsed = Parsed {
        kind,
        little,
        reply_serial: None,
        error_name: None,
        signature: String::new(),
        body: message
            .get(align(fields_end, 8)..)
            .ok_or("a truncated header")?
            .to_vec(),
    };
    let mut at = 16;
    while at < fields_end {
        at = align(at, 8);
        let code = *message.get(at).ok_or("a truncated header")?;
        at += 1;
        let signature = read_string(message, &mut at, b'g', little)?;
        match signature.as_str() {
            "u" => {
                at = align(at, 4);
                if at + 4 > message.len() {
                    return Err("a truncated header".to_string());
                }
                let value = u32_at(message, at, little);
                at += 4;
                if code == REPLY_SERIAL {
                    parsed.reply_serial = Some(value);
                }
            }
            "s" | "o" | "g" => {
                let kind = signature.as_bytes()[0];
                let value = read_string(message, &mut at, kind, little)?;
                match code {
                    ERROR_NAME => parsed.error_name = Some(value),
                    SIGNATURE => parsed.signature = value,
                    _ => {}
                }
            }
            other => return Err(format!("a header field of type {other:?}")),
        }
    }
    Ok(parsed)
}

/// The first value of a body whose signature is `signature`, when it is a
/// string or an object path, or a variant holding one.
pub fn first_string(signature: &str, body: &[u8], little: bool) -> Option<String> {
    let mut at = 0;
    match signature.as_bytes().first()? {
        b's' | b'o' => read_string(body, &mut at, b's', little).ok(),
        b'v' => {
            let inner = read_string(body, &mut at, b'g', little).ok()?;
            match inner.as_str() {
                "s" | "o" => read_string(body, &mut at, b's', little).ok(),
                _ => None,
            }
        }
        _ => None,
    }
}

impl Reply {
    /// The first value of a return, as [`first_string`] reads it, or the
    /// error's name and message.
    pub fn string(&self) -> Result<String, String> {
        match self {
            // Replies are read in the byte order they came in; systemd's
            // is the machine's, which nodectl's own is.
            Reply::Return { signature, body } => {
                first_string(signature, body, cfg!(target_endian = "little"))
                    .ok_or_else(|| format!("a reply of signature {signature:?}"))
            }
            Reply::Error { name, message } => Err(format!("{name}: {message}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_laid_out_as_the_specification_says() {
        let call = method_call(7, "d.e", "/p", "i.f", "M", &["ab"]);
        assert_eq!(&call[..4], b"l\x01\x00\x01");
        assert_eq!(
            u32_at(&call, 4, true),
            7,
            "body: 4-byte length, 2 bytes, NUL"
        );
        assert_eq!(u32_at(&call, 8, true), 7, "serial");
        let parsed = parse(&call).unwrap();
        assert_eq!(parsed.signature, "s");
        assert_eq!(first_string("s", &parsed.body, true).as_deref(), Some("ab"));
        assert_eq!(
            call.len() % 8,
            7,
            "the header ends 8-aligned, the body follows"
        );
    }

    #[test]
    fn a_variant_holding_a_string_is_read() {
        let mut body = vec![1, b's', 0, 0];
        put_string(&mut body, "inactive");
        assert_eq!(first_string("v", &body, true).as_deref(), Some("inactive"));
        assert_eq!(first_string("v", &[1, b'u', 0, 0, 1, 0, 0, 0], true), None);
    }

    /// A message systemd sends on a direct connection: `kind` (2 return,
    /// 3 error, 4 signal), its sender `org.freedesktop.systemd1` (no unique
    /// name: what zbus 5 panics on), a string or object path body.
    fn from_systemd(
        kind: u8,
        reply_serial: Option<u32>,
        error: Option<&str>,
        body: &str,
    ) -> Vec<u8> {
        let mut payload = Vec::new();
        put_string(&mut payload, body);
        let mut message = vec![b'l', kind, 1, 1];
        message.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        message.extend_from_slice(&77u32.to_le_bytes());
        message.extend_from_slice(&[0; 4]);
        if let Some(serial) = reply_serial {
            pad(&mut message, 8);
            message.extend_from_slice(&[REPLY_SERIAL, 1, b'u', 0]);
            message.extend_from_slice(&serial.to_le_bytes());
        }
        if let Some(name) = error {
            put_field(&mut message, ERROR_NAME, b's', name);
        }
        put_field(&mut message, 7, b's', "org.freedesktop.systemd1");
        put_field(
            &mut message,
            SIGNATURE,
            b'g',
            if kind == 3 { "s" } else { "o" },
        );
        let fields = (message.len() - 16) as u32;
        message[12..16].copy_from_slice(&fields.to_le_bytes());
        pad(&mut message, 8);
        message.extend_from_slice(&payload);
        message
    }

    /// One whole method call, as systemd reads it: (its serial, parsed).
    fn read_call(theirs: &mut UnixStream) -> (u32, Parsed) {
        let mut header = [0u8; 16];
        theirs.read_exact(&mut header).unwrap();
        let fields = u32_at(&header, 12, true) as usize;
        let rest = align(16 + fields, 8) - 16 + u32_at(&header, 4, true) as usize;
        let mut call = header.to_vec();
        call.resize(16 + rest, 0);
        theirs.read_exact(&mut call[16..]).unwrap();
        (u32_at(&call, 8, true), parse(&call).unwrap())
    }

    #[test]
    fn systemd_s_replies_are_read_whatever_their_sender_and_signals_skipped() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let systemd = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut byte = [0u8; 1];
            while !seen.ends_with(b"BEGIN\r\n") {
                if seen.ends_with(b"\r\n") && seen.starts_with(b"\0AUTH EXTERNAL ") {
                    theirs
                        .write_all(b"OK 0123456789abcdef0123456789abcdef\r\n")
                        .unwrap();
                    seen.clear();
                }
                theirs.read_exact(&mut byte).unwrap();
                seen.push(byte[0]);
            }
            let (serial, call) = read_call(&mut theirs);
            assert_eq!(call.signature, "ss");
            // A signal first, then a reply to another serial, then its own.
            theirs
                .write_all(&from_systemd(4, None, None, "/x"))
                .unwrap();
            theirs
                .write_all(&from_systemd(2, Some(serial + 9), None, "/no"))
                .unwrap();
            let job = "/org/freedesktop/systemd1/job/17";
            theirs
                .write_all(&from_systemd(2, Some(serial), None, job))
                .unwrap();
            // The next call gets an error.
            let (serial, _) = read_call(&mut theirs);
            let name = "org.freedesktop.systemd1.NoSuchUnit";
            theirs
                .write_all(&from_systemd(3, Some(serial), Some(name), "no such unit"))
                .unwrap();
        });
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let mut connection = Connection::authenticate(ours, deadline).unwrap();
        let path = "/org/freedesktop/systemd1";
        let reply = connection
            .call(
                "org.freedesktop.systemd1",
                path,
                "m.M",
                "StopUnit",
                &["u.slice", "replace"],
            )
            .unwrap();
        assert_eq!(
            reply.string().as_deref(),
            Ok("/org/freedesktop/systemd1/job/17")
        );
        let reply = connection
            .call(
                "org.freedesktop.systemd1",
                path,
                "m.M",
                "GetUnit",
                &["u.slice"],
            )
            .unwrap();
        assert_eq!(
            reply,
            Reply::Error {
                name: "org.freedesktop.systemd1.NoSuchUnit".to_string(),
                message: "no such unit".to_string()
            }
        );
        systemd.join().unwrap();
    }

    #[test]
    fn a_silent_peer_is_an_error_at_the_deadline() {
        let (ours, _theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + std::time::Duration::from_millis(200);
        let started = Instant::now();
        let failed = Connection::authenticate(ours, deadline)
            .err()
            .unwrap_or_default();
        assert!(failed.contains("deadline"), "{failed}");
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn a_truncated_message_is_an_error_never_a_panic() {
        let call = method_call(1, "d.e", "/p", "i.f", "M", &["x"]);
        for cut in 16..call.len() {
            let mut short = call[..cut].to_vec();
            // Its header claims more fields than there are.
            let _ = parse(&short);
            short.truncate(16);
            let _ = parse(&short);
        }
        assert_eq!(first_string("s", &[9, 0, 0, 0, b'a'], true), None);
    }
}
