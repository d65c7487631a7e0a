//! A targets file, its body files and a data file on disk, compiled and rendered the way
//! the load engine uses them.

use std::path::PathBuf;

use loadlab_template::{
    parse_targets, Cursor, Data, Draw, Generator, Order, Slot, TargetSpec, Template, TemplateError,
};

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("loadlab-e2e-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A target's templates: URL, header values, body.
struct Compiled {
    url: Template,
    headers: Vec<(String, Template)>,
    body: Option<Template>,
}

fn compile(spec: &TargetSpec, data: Option<&Data>) -> Result<Compiled, TemplateError> {
    let url = Template::compile(&spec.url, Slot::Url, &spec.url_origin(), data)?;
    let headers = (0..spec.headers.len())
        .map(|i| {
            let (name, value) = spec.header(i);
            let t = Template::compile(value, Slot::Header, &spec.header_origin(i), data)?;
            Ok((name.to_owned(), t))
        })
        .collect::<Result<_, TemplateError>>()?;
    let body = match (&spec.body, spec.body_origin()) {
        (Some(body), Some(origin)) => Some(Template::compile(body, Slot::Body, &origin, data)?),
        _ => None,
    };
    Ok(Compiled { url, headers, body })
}

#[test]
fn targets_and_data_render_requests() {
    let dir = Dir::new("render");
    let data = Data::load(&dir.write(
        "users.csv",
        "id,name\n1,ann lee\n2,\"bob, \"\"the\"\" builder\"\n3,é#\n",
    ))
    .unwrap();
    dir.write(
        "order.json",
        "{\n  \"seq\": ${seq},\n  \"user\": \"${name}\"\n}\n",
    );
    let targets = parse_targets(&dir.write(
        "targets.txt",
        "# @name get\nGET http://api/users/${id}?by=${name}\nX-Req: ${seq}\n\n\
         # @name order\nPOST http://api/orders\nContent-Type: application/json\n@order.json\n",
    ))
    .unwrap();
    assert_eq!(targets.len(), 2);
    let compiled: Vec<Compiled> = targets
        .iter()
        .map(|t| compile(t, Some(&data)).unwrap())
        .collect();
    let cursor = Cursor::new();
    let mut gen = Generator::new(9, 0);
    let mut rendered = Vec::new();
    for _ in 0..3 {
        let row = data
            .pick(Order::Unique, &cursor, &mut gen)
            .map(|i| data.row(i));
        let draw = Draw::new(cursor.next_seq(), row);
        for c in &compiled {
            let mut url = Vec::new();
            c.url.render(&draw, &mut gen, &mut url);
            let mut header = Vec::new();
            c.headers[0].1.render(&draw, &mut gen, &mut header);
            let mut body = Vec::new();
            if let Some(b) = &c.body {
                b.render(&draw, &mut gen, &mut body);
            }
            rendered.push((
                String::from_utf8(url).unwrap(),
                String::from_utf8(header).unwrap(),
                String::from_utf8(body).unwrap(),
            ));
        }
    }
    let r = |u: &str, h: &str, b: &str| (u.to_owned(), h.to_owned(), b.to_owned());
    assert_eq!(
        rendered,
        vec![
            r("http://api/users/1?by=ann%20lee", "1", ""),
            r(
                "http://api/orders",
                "application/json",
                "{\n  \"seq\": 1,\n  \"user\": \"ann lee\"\n}\n"
            ),
            r("http://api/users/2?by=bob,%20%22the%22%20builder", "2", ""),
            r(
                "http://api/orders",
                "application/json",
                "{\n  \"seq\": 2,\n  \"user\": \"bob, \"the\" builder\"\n}\n"
            ),
            r("http://api/users/3?by=%C3%A9%23", "3", ""),
            r(
                "http://api/orders",
                "application/json",
                "{\n  \"seq\": 3,\n  \"user\": \"é#\"\n}\n"
            ),
        ]
    );
    assert_eq!(data.pick(Order::Unique, &cursor, &mut gen), None);
}

#[test]
fn errors_point_into_the_files() {
    let dir = Dir::new("errors");
    let body = dir.write("bad.json", "{\n  \"a\": 1,\n  \"b\": \"${nme}\"\n}\n");
    let targets = parse_targets(&dir.write(
        "targets.txt",
        "POST http://api/x\n@bad.json\n\nGET http://api/${idd}\n\nGET http://api/\nX-Name:   ${name}\n",
    ))
    .unwrap();
    let data = Data::load(&dir.write("users.csv", "id,name\n1,ann\n2,\"bo\r\nb\"\n")).unwrap();
    let file = |name: &str| dir.0.join(name).display().to_string();
    let errors: Vec<String> = targets
        .iter()
        .map(|t| compile(t, Some(&data)).err().unwrap().to_string())
        .collect();
    let builtins = "built-ins: seq, rand:LO-HI, uuid, pick:A,B,…, randstr:N, hex:N, now, now_ms";
    let csv = file("users.csv");
    assert_eq!(
        errors,
        vec![
            // The body's bad expression is on its line 3.
            format!(
                "{}:3:9: unknown name `${{nme}}`: the data file {csv} has columns id, name; {builtins}",
                body.display()
            ),
            format!(
                "{}:4:16: unknown name `${{idd}}`: the data file {csv} has columns id, name; {builtins}",
                file("targets.txt")
            ),
            format!(
                "{csv}:3:3: the value of column `name` holds a carriage return (CR), which a \
                 header cannot carry; the header at {}:7:11 uses `${{name}}`",
                file("targets.txt")
            ),
        ]
    );
    // Without a data file.
    let e = compile(&targets[1], None).err().unwrap();
    assert_eq!(
        e.message,
        format!("unknown name `${{idd}}`: no data file given (--data FILE); {builtins}")
    );
}
