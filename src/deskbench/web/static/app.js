// deskbench human baseline: autosave the answer draft (every action else is a plain form POST).
(function () {
  "use strict";
  var form = document.getElementById("answer-form");
  if (!form) return;
  var box = document.getElementById("answer");
  var note = document.getElementById("saved");
  var timer = null;
  function save() {
    var body = new URLSearchParams();
    body.set("csrf", form.elements.csrf.value);
    body.set("answer", box.value);
    fetch(form.dataset.draft, {method: "POST", body: body, credentials: "same-origin",
                               headers: {"X-Deskbench": "autosave"}})
      .then(function (r) { note.textContent = r.ok ? "draft saved" : "draft not saved (" + r.status + ")"; })
      .catch(function () { note.textContent = "draft not saved"; });
  }
  box.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(save, 600);
  });
})();
