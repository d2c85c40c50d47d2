# kiln: the values a flag accepts, read from an installed engine's source without importing it.
# stdin: JSON [{"file": path, "name": NAME}, ...]; stdout: JSON [[values] or null, ...].
# NAME is a module-level list/tuple/set of strings, a Literal[...] alias, or an Enum class whose
# members have string values (or, with "members": "names", the members' names).
import ast, json, sys


def strings(node):
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return out if len(out) == len(node.elts) else None
    if isinstance(node, ast.Subscript) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Literal":
        inner = node.slice
        if isinstance(inner, ast.Tuple):
            return strings(inner)
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            return [inner.value]
    return None


def find(tree, name, members):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return strings(node.value)
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == name and node.value:
            return strings(node.value)
        if isinstance(node, ast.ClassDef) and node.name == name:
            out = []
            for item in node.body:
                if not isinstance(item, ast.Assign) or len(item.targets) != 1:
                    continue
                target = getattr(item.targets[0], "id", "")
                if members == "names" and target.isupper():
                    out.append(target)
                elif members == "values" and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str):
                    out.append(item.value.value)
            return out or None
    return None


answers = []
for ask in json.load(sys.stdin):
    try:
        with open(ask["file"], "rb") as f:
            answers.append(find(ast.parse(f.read()), ask["name"], ask.get("members", "values")))
    except (OSError, SyntaxError, ValueError):
        answers.append(None)
print(json.dumps(answers))
