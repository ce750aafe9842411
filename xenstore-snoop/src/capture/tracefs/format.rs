//! Trace event formats (`events/GROUP/NAME/format`) and decoding of the raw
//! records perf hands us in that layout.

use anyhow::{bail, Context, Result};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `__data_loc` field: a u32 of len << 16 | offset into the record.
    pub data_loc: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    pub name: String,
    pub id: u16,
    pub fields: Vec<Field>,
}

impl Format {
    pub fn parse(text: &str) -> Result<Format> {
        let mut name = None;
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(n) = line.strip_prefix("name:") {
                name = Some(n.trim().to_string());
            } else if let Some(i) = line.strip_prefix("ID:") {
                id = Some(i.trim().parse().context("bad ID in event format")?);
            } else if line.starts_with("field:") {
                fields.push(parse_field(line).with_context(|| format!("bad field `{line}`"))?);
            }
        }
        Ok(Format {
            name: name.context("event format has no name")?,
            id: id.context("event format has no ID")?,
            fields,
        })
    }

    pub fn field(&self, name: &str) -> Result<&Field> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .with_context(|| format!("event {} has no field {name}", self.name))
    }
}

/// `field:__data_loc char[] s1; offset:72; size:4; signed:1;` (tab-separated)
fn parse_field(line: &str) -> Result<Field> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once(':').context("no colon")?;
        match key {
            "field" => decl = Some(value.trim()),
            "offset" => offset = Some(value.trim().parse()?),
            "size" => size = Some(value.trim().parse()?),
            "signed" => signed = value.trim() == "1",
            _ => {}
        }
    }
    let decl = decl.context("no declaration")?;
    let name = decl
        .split_whitespace()
        .last()
        .context("empty declaration")?
        .split('[')
        .next()
        .unwrap_or_default()
        .to_string();
    Ok(Field {
        name,
        offset: offset.context("no offset")?,
        size: size.context("no size")?,
        signed,
        data_loc: decl.starts_with("__data_loc"),
    })
}

impl Field {
    /// The unsigned integer value of this field in `rec`.
    pub fn uint(&self, rec: &[u8]) -> Result<u64> {
        let bytes = rec
            .get(self.offset..self.offset + self.size)
            .with_context(|| format!("record too short for field {}", self.name))?;
        Ok(match self.size {
            1 => bytes[0] as u64,
            2 => u16::from_ne_bytes(bytes.try_into()?) as u64,
            4 => u32::from_ne_bytes(bytes.try_into()?) as u64,
            8 => u64::from_ne_bytes(bytes.try_into()?),
            n => bail!("field {} has unsupported size {n}", self.name),
        })
    }

    /// The bytes of a `__data_loc` string, without its NUL terminator.
    pub fn str<'r>(&self, rec: &'r [u8]) -> Result<&'r [u8]> {
        if !self.data_loc {
            bail!("field {} is not a __data_loc string", self.name);
        }
        let loc = self.uint(rec)? as u32;
        let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
        let bytes = rec
            .get(off..off + len)
            .with_context(|| format!("string {} runs past the record", self.name))?;
        Ok(bytes.strip_suffix(&[0]).unwrap_or(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from this machine's tracefs for the request uprobe.
    pub const REQUEST_FORMAT: &str = include_str!("../../../testdata/request.format");

    #[test]
    fn parses_a_captured_uprobe_format() {
        let f = Format::parse(REQUEST_FORMAT).unwrap();
        assert_eq!(f.name, "request");
        assert_eq!(f.id, 2332);
        let s1 = f.field("s1").unwrap();
        assert_eq!((s1.offset, s1.size, s1.data_loc), (72, 4, true));
        let dom = f.field("dom").unwrap();
        assert_eq!((dom.offset, dom.size, dom.data_loc), (24, 8, false));
        assert_eq!(f.field("common_type").unwrap().size, 2);
        assert!(f.field("nope").is_err());
    }

    #[test]
    fn decodes_data_loc_strings_and_ints() {
        let f = Format::parse(REQUEST_FORMAT).unwrap();
        let mut rec = vec![0u8; 80];
        rec[16..24].copy_from_slice(&42u64.to_ne_bytes());
        let text = b"/local/domain/6\0";
        let loc = ((text.len() as u32) << 16) | rec.len() as u32;
        rec[72..76].copy_from_slice(&loc.to_ne_bytes());
        rec.extend_from_slice(text);
        let empty = (1u32 << 16) | rec.len() as u32;
        rec[76..80].copy_from_slice(&empty.to_ne_bytes());
        rec.push(0);
        assert_eq!(f.field("serial").unwrap().uint(&rec).unwrap(), 42);
        assert_eq!(
            f.field("s1").unwrap().str(&rec).unwrap(),
            b"/local/domain/6"
        );
        assert_eq!(f.field("s2").unwrap().str(&rec).unwrap(), b"");
        // a corrupt location is an error, not a panic
        rec[72..76].copy_from_slice(&((100u32 << 16) | 90).to_ne_bytes());
        assert!(f.field("s1").unwrap().str(&rec).is_err());
        assert!(f.field("serial").unwrap().uint(&rec[..20]).is_err());
    }
}
